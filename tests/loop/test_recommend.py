"""Opt-in queues and recommend mode against the fake API server over real HTTP.

A recommend-mode queue gets its recommendation as annotations and keeps its spec; a queue that did not opt
in is never written; a queue annotated mode=apply is resized; an unchanged recommendation is not sent again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from kubernetes import client

from predictor.actuators.audit import AuditLog
from predictor.actuators.schemas import validate_object
from predictor.actuators.volcano import VolcanoActuator
from predictor.config import load_settings
from predictor.loop import KubeCluster, Loop
from tests.actuators.fake_apiserver import FakeApiServer, queue_object, serve
from tests.loop.test_loop import NOW, Flat, History

GPU = "nvidia.com/gpu"
OPT_IN = {"gpu-capacity-predictor/managed": "true"}


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with serve() as server:
        server.add(queue_object("team-a", deserved=16, capability=32, guarantee=4, allocated=10, annotations=OPT_IN))
        server.add(
            queue_object(
                "team-b",
                deserved=30,
                capability=48,
                guarantee=8,
                allocated=12,
                annotations={**OPT_IN, "gpu-capacity-predictor/mode": "apply"},
            )
        )
        server.add(queue_object("team-c", deserved=10, capability=32, allocated=2))  # never opted in
        server.add(queue_object("default", deserved=1, capability=1))
        yield server


@pytest.fixture
def api(fake: FakeApiServer) -> Iterator[client.ApiClient]:
    with client.ApiClient(client.Configuration(host=fake.url)) as api_client:
        yield api_client


def make_loop(tmp_path: Path, api: client.ApiClient, *, writes: str = "apply", at: pd.Timestamp = NOW) -> Loop:
    settings = load_settings(
        None,
        actuators={
            "queues": {"writes": writes, "mode": "recommend"},
            "audit_log": tmp_path / "audit.jsonl",
            "plan_dir": tmp_path / "plans",
        },
    )
    actuator = VolcanoActuator(api, timeout_s=2)
    return Loop(
        settings,
        cluster=KubeCluster(actuator),
        history=History({"team-a": 22, "team-b": 41, "team-c": 30}),
        forecaster=Flat(),
        actuator=actuator,
        clock=lambda: at,
    )


def annotations(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def test_a_recommend_mode_queue_gets_annotations_and_keeps_its_spec(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    spec_before = dict(fake.queues["team-a"]["spec"])
    report = make_loop(tmp_path, api).run_once()
    assert report.modes == {"team-a": "recommend", "team-b": "apply"}
    team_a = fake.queues["team-a"]
    assert team_a["spec"] == spec_before  # the spec is the team's until it switches to apply
    said = annotations(team_a)
    assert report.plan is not None
    planned = report.plan.desired["team-a"].deserved[GPU]
    assert planned > 16  # the forecast (22 ± 2) wants more than the live 16
    # What apply would set, in kubectl's quantity form
    assert said["gpu-capacity-predictor/recommended-deserved"] == f"{GPU}={planned:g}"
    desired = report.plan.desired["team-a"]
    assert said["gpu-capacity-predictor/recommended-capability"] == f"{GPU}={desired.capability[GPU]:g}"
    assert said["gpu-capacity-predictor/recommended-guarantee"] == f"{GPU}={desired.guarantee[GPU]:g}"
    assert f"deserved[nvidia.com/gpu] 16->{planned:g} (" in said["gpu-capacity-predictor/reason"]
    assert said["gpu-capacity-predictor/model"] == "models:/gpu-forecast/7"
    assert said["gpu-capacity-predictor/recommended-at"] == "2026-11-02T10:20:00Z"
    assert said["gpu-capacity-predictor/managed"] == "true"  # its own annotations stay
    # Only metadata was sent to team-a: never a spec, always the resourceVersion it was read at.
    sent = [r.body for r in fake.patches() if r.path.endswith("/team-a")]
    assert len(sent) == 1 and set(sent[0]) == {"metadata"} and sent[0]["metadata"]["resourceVersion"]
    # team-b opted into apply: resized as before
    resized = report.plan.desired["team-b"].deserved[GPU]
    assert resized > 30 and fake.queues["team-b"]["spec"]["deserved"][GPU] == f"{resized:g}"
    assert [o.change.target for o in report.outcomes if o.outcome == "applied"] == ["team-b"]
    assert "gpu-capacity-predictor/recommended-deserved" not in annotations(fake.queues["team-b"])
    for obj in fake.queues.values():  # every object written is a valid Volcano Queue
        validate_object(obj)
    records = AuditLog(tmp_path / "audit.jsonl").read()
    recommended = [r for r in records if r["queue"] == "team-a" and r["outcome"] == "recommended"]
    assert recommended and {r["field"] for r in recommended} >= {"deserved"}
    assert not [r for r in records if r["queue"] == "team-a" and r["outcome"] in ("intent", "applied")]


def test_a_queue_that_did_not_opt_in_is_never_written(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    before = fake.queues["team-c"]
    report = make_loop(tmp_path, api).run_once()
    assert report.plan is not None and "team-c" not in report.plan.desired
    assert fake.queues["team-c"] == before
    assert not [r for r in fake.requests if r.path.endswith("/team-c") and r.method != "GET"]
    assert {h.code for h in report.plan.held if h.queue == "team-c"} == {"opted_out"}


def test_an_unchanged_recommendation_is_not_sent_again(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    make_loop(tmp_path, api).run_once()
    version = fake.queues["team-a"]["metadata"]["resourceVersion"]
    count = len([r for r in fake.patches() if r.path.endswith("/team-a")])
    # An hour later, the same recommendation: the timestamp alone is no reason to write.
    report = make_loop(tmp_path, api, at=NOW + pd.Timedelta(hours=1)).run_once()
    assert report.recommended == []
    assert len([r for r in fake.patches() if r.path.endswith("/team-a")]) == count
    assert fake.queues["team-a"]["metadata"]["resourceVersion"] == version


def test_a_recommendation_in_server_dry_run_is_validated_not_written(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    report = make_loop(tmp_path, api, writes="server-dry-run").run_once()
    assert [o.outcome for o in report.recommended] == ["dry-run-ok"]
    assert fake.patches(dry_run=False) == [] and fake.writes == 0
    assert "gpu-capacity-predictor/reason" not in annotations(fake.queues["team-a"])
    outcomes = {r["outcome"] for r in AuditLog(tmp_path / "audit.jsonl").read() if r["queue"] == "team-a"}
    assert "recommend-dry-run" in outcomes and "dry-run-ok" not in outcomes  # no cooldown from a recommendation


def test_a_bad_mode_annotation_recommends(fake: FakeApiServer, api: client.ApiClient, tmp_path: Path) -> None:
    fake.edit("team-b", lambda q: q["metadata"]["annotations"].update({"gpu-capacity-predictor/mode": "aply"}))
    spec_before = dict(fake.queues["team-b"]["spec"])
    report = make_loop(tmp_path, api).run_once()
    assert report.modes["team-b"] == "recommend" and fake.queues["team-b"]["spec"] == spec_before


def test_loop_once_prints_each_managed_queue_with_its_recommendation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from rich.console import Console

    from predictor.cli import main

    monkeypatch.setattr("predictor.commands.loop.console", Console(width=200, force_terminal=False))
    queues = [
        queue_object("team-a", deserved=16, capability=32, guarantee=4, allocated=10, annotations=OPT_IN),
        queue_object("team-c", deserved=10, capability=32, allocated=2),  # not opted in: not listed
    ]
    (tmp_path / "queues.json").write_text(json.dumps({"items": queues}))
    now = pd.Timestamp.now(tz="UTC").floor("h")
    rows = [
        {"series_id": q, "timestamp": t.isoformat(), "value": v}
        for q, v in (("team-a", 22.0), ("team-c", 30.0))
        for t in pd.date_range(end=now, periods=72, freq="h")
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "history.csv", index=False)
    config = tmp_path / "settings.yaml"
    config.write_text(
        json.dumps({"actuators": {"audit_log": str(tmp_path / "a.jsonl"), "plan_dir": str(tmp_path / "p")}})
    )
    args = ["loop", "--once", "--config", str(config), "--history", str(tmp_path / "history.csv")]
    assert main([*args, "--queues", str(tmp_path / "queues.json"), "--model", "seasonal_naive_24"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "team-a" in line)
    cells = [c.strip() for c in row.strip("│┃ ").split("│")]
    assert cells[:3] == ["team-a", "recommend", "16"] and float(cells[3]) > 16
    assert cells[4].startswith("planned (")
    assert "team-c" not in out


def test_a_queue_switched_to_apply_loses_its_old_recommendation(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    make_loop(tmp_path, api).run_once()
    assert "gpu-capacity-predictor/reason" in annotations(fake.queues["team-a"])
    fake.edit("team-a", lambda q: q["metadata"]["annotations"].update({"gpu-capacity-predictor/mode": "apply"}))
    report = make_loop(tmp_path, api, at=NOW + pd.Timedelta(hours=1)).run_once(force=True)
    assert report.modes["team-a"] == "apply"
    left = annotations(fake.queues["team-a"])
    assert not [k for k in left if k.startswith("gpu-capacity-predictor/recommended") or k.endswith("/reason")]
    assert left["gpu-capacity-predictor/managed"] == "true" and left["gpu-capacity-predictor/mode"] == "apply"
    validate_object(fake.queues["team-a"])
