"""``predictor rollback`` against the fake API server over real HTTP: a cycle's before-values restored
through the actuator (dry run first), audited as a rollback of that cycle; bad ids are one line, exit 1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from predictor.actuators.audit import AuditLog
from predictor.actuators.schemas import validate_object
from predictor.actuators.volcano import VolcanoActuator
from predictor.cli import main
from predictor.config import load_settings
from predictor.loop import KubeCluster, Loop
from tests.actuators.fake_apiserver import FakeApiServer, serve_team_queues
from tests.loop.test_loop import NOW, Flat, History
from tests.support.actuators import resizing

GPU = "nvidia.com/gpu"
CYCLE = "2026-11-02T10:00:00Z"


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with serve_team_queues() as server:
        yield server


@pytest.fixture
def resized(fake: FakeApiServer, tmp_path: Path) -> list[str]:
    """One apply cycle has resized team-a and team-b; returns the CLI's --kubeconfig and --config arguments."""
    actuators = {**resizing("apply"), "audit_log": tmp_path / "audit.jsonl", "plan_dir": tmp_path / "plans"}
    settings = load_settings(None, actuators=actuators)
    actuator = VolcanoActuator(client.ApiClient(client.Configuration(host=fake.url)), timeout_s=2)
    loop = Loop(
        settings,
        cluster=KubeCluster(actuator),
        history=History({"team-a": 22, "team-b": 41}),
        forecaster=Flat(),
        actuator=actuator,
        clock=lambda: NOW,
    )
    assert [o.outcome for o in loop.run_once().outcomes] == ["applied", "applied"]
    assert fake.queues["team-a"]["spec"]["deserved"][GPU] == "24"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "fake",
                "clusters": [{"name": "fake", "cluster": {"server": fake.url}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
            }
        )
    )
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump({"actuators": {"audit_log": str(tmp_path / "audit.jsonl")}}))
    return ["--kubeconfig", str(kubeconfig), "--config", str(config)]


def test_a_dry_run_first_then_apply_restores_the_cycle_and_audits_it(
    fake: FakeApiServer, resized: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    after = {name: dict(fake.queues[name]["spec"]) for name in ("team-a", "team-b")}
    writes = fake.writes
    assert main(["rollback", "--cycle", CYCLE, *resized]) == 0
    out = capsys.readouterr().out
    assert "dry run" in out and "team-a" in out and "team-b" in out
    assert fake.writes == writes and fake.patches(dry_run=True)  # validated by the server, nothing written
    assert {name: fake.queues[name]["spec"] for name in after} == after

    assert main(["rollback", "--cycle", CYCLE, *resized, "--apply"]) == 0
    team_a, team_b = fake.queues["team-a"]["spec"], fake.queues["team-b"]["spec"]
    assert (team_a["deserved"][GPU], team_a["guarantee"]["resource"][GPU]) == ("16", "4")
    assert (team_b["deserved"][GPU], team_b["capability"][GPU]) == ("40", "48")
    assert team_a["deserved"]["cpu"] == "256"  # the other resources of the queue are left alone
    for obj in fake.queues.values():
        validate_object(obj)
    records = [r for r in AuditLog(tmp_path / "audit.jsonl").read() if r["code"] == "rollback"]
    applied = [r for r in records if r["outcome"] == "applied" and r["mode"] == "apply"]
    assert {r["cycle"] for r in records} == {CYCLE} and {r["queue"] for r in applied} == {"team-a", "team-b"}
    deserved = next(r for r in applied if r["queue"] == "team-a" and r["field"] == "deserved")
    assert (deserved["before"], deserved["after"]) == (24.0, 16.0)
    intents = [r for r in records if r["outcome"] == "intent" and r["mode"] == "apply"]
    assert len(intents) == len(applied)  # each write announced before it was sent
    # The Lease was held as a loop holds it, and given back.
    lease = fake.leases[("gpu-capacity-predictor", "gpu-capacity-predictor-loop")]
    assert not lease["spec"].get("holderIdentity")

    # Again: the queues are already as before the cycle, nothing is sent.
    writes = fake.writes
    assert main(["rollback", "--cycle", CYCLE, *resized, "--apply"]) == 0
    assert fake.writes == writes and "already as before cycle" in capsys.readouterr().out


def test_one_queue_alone(fake: FakeApiServer, resized: list[str]) -> None:
    assert main(["rollback", "--cycle", CYCLE, "--queue", "team-b", *resized, "--apply"]) == 0
    assert fake.queues["team-b"]["spec"]["deserved"][GPU] == "40"
    assert fake.queues["team-a"]["spec"]["deserved"][GPU] == "24"


def test_a_queue_changed_since_the_cycle_is_left_alone(
    fake: FakeApiServer, resized: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    fake.edit("team-a", lambda q: q["spec"]["deserved"].update({GPU: "20"}))
    assert main(["rollback", "--cycle", CYCLE, *resized, "--apply"]) == 1
    out = capsys.readouterr().out
    assert fake.queues["team-a"]["spec"]["deserved"][GPU] == "20"
    assert fake.queues["team-b"]["spec"]["deserved"][GPU] == "40"  # the other queue still rolled back
    assert "changed since the cycle" in out and "not rolled back: team-a" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cycle", "2026-01-01T00:00:00Z"], "--cycle 2026-01-01T00:00:00Z: no such cycle in the audit log"),
        (["--cycle", CYCLE, "--queue", "team-z"], f"--queue team-z: cycle {CYCLE} did not resize that queue"),
    ],
)
def test_an_unknown_cycle_or_queue_is_one_line_and_exit_1(
    fake: FakeApiServer, resized: list[str], capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    writes = len(fake.patches())
    assert main(["rollback", *args, *resized]) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert len(fake.patches()) == writes


def test_a_running_loop_holding_the_lease_stops_the_rollback(
    fake: FakeApiServer, resized: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    import pandas as pd

    from predictor.loop.leader import LeaseLock

    api = client.ApiClient(client.Configuration(host=fake.url))
    loop = LeaseLock(api, name="gpu-capacity-predictor-loop", namespace="gpu-capacity-predictor", duration_s=600)
    assert loop.acquire(pd.Timestamp.now(tz="UTC")) == ""
    assert main(["rollback", "--cycle", CYCLE, *resized, "--apply"]) == 1
    assert "stop the loop first" in capsys.readouterr().err
    assert fake.queues["team-a"]["spec"]["deserved"][GPU] == "24"
