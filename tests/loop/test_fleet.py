"""Fleets, the loop side: one cycle per cluster, each on its own API, Lease, plan directory and state.

Two fake API servers (``tests.actuators.fake_apiserver``, real HTTP) are two clusters that both have a
queue ``team-a``. The fleet's forecaster knows series only by their qualified ids (``a/team-a``), as the
model training registered does. A cluster whose API is down, or whose cycle raises, is reported while the
other still plans and applies.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pandas as pd
import pytest
from kubernetes import client
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from predictor.actuators.audit import AuditLog
from predictor.actuators.volcano import VolcanoActuator
from predictor.config import Settings, load_settings
from predictor.errors import ModelError
from predictor.loop import FileLock, KubeCluster, LeaseLock, Loop
from predictor.loop.fleet import FleetLoop, QualifiedForecaster, cluster_settings
from tests.actuators.fake_apiserver import FakeApiServer, Request, queue_object, serve
from tests.loop.test_hardening import FRESH, Flat, History
from tests.support.actuators import resizing

NOW = pd.Timestamp("2026-11-02T10:20:00Z")
NAMESPACE = "gpu-capacity-predictor"
DOWN = "http://127.0.0.1:1"  # nothing listens there: connection refused, as for an API server that is down


class Keyed(Flat):
    """The registered model's contract: per-series state under qualified ids; an unknown series is an error."""

    def __init__(self, known: set[str]) -> None:
        self.known, self.seen = known, set[str]()

    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        ids = set(history["series_id"].astype(str))
        self.seen |= ids
        if ids - self.known:
            raise ModelError(f"no state for series {sorted(ids - self.known)}")
        return super().forecast(history, horizon=horizon)


@pytest.fixture
def servers() -> Iterator[dict[str, FakeApiServer]]:
    with serve() as a, serve() as b:
        a.add(queue_object("team-a", deserved=16, capability=32, guarantee=4, allocated=10))
        a.add(queue_object("team-b", deserved=40, capability=48, guarantee=8, allocated=12))
        b.add(queue_object("team-a", deserved=4, capability=8, guarantee=2, allocated=2))
        yield {"a": a, "b": b}


HISTORY = {"a": {"team-a": 22.0, "team-b": 41.0}, "b": {"team-a": 5.0}}


class Fleet:
    """Builds a fleet of loops the way ``predictor loop`` does, with injected history and clock."""

    def __init__(self, tmp_path: Path, mode: str, stack: ExitStack) -> None:
        self.settings: Settings = load_settings(
            None, actuators={**resizing(mode), "audit_log": tmp_path / "audit.jsonl", "plan_dir": tmp_path / "plans"}
        )
        self.audit = AuditLog(self.settings.actuators.audit_log)
        self.lock = FileLock(self.audit.path.with_name(self.audit.path.name + ".lock"), identity="pod-1")
        self.forecaster = Keyed({f"{c}/{q}" for c, queues in HISTORY.items() for q in queues})
        self.stack, self.mode = stack, mode

    def member(self, name: str, url: str, history: object | None = None) -> Loop:
        own = cluster_settings(self.settings, name)
        api = self.stack.enter_context(client.ApiClient(client.Configuration(host=url)))
        actuator = VolcanoActuator(api, timeout_s=2)
        lease = (
            None
            if self.mode == "plan"
            else LeaseLock(
                api, name=own.loop.lease_name, namespace=own.loop.lease_namespace, duration_s=60, identity="pod-1"
            )
        )
        history = history or History({q: (v, FRESH) for q, v in HISTORY[name].items()})
        return Loop(
            own,
            cluster=KubeCluster(actuator),
            history=history,  # type: ignore[arg-type]
            forecaster=QualifiedForecaster(self.forecaster, name),
            actuator=actuator,
            clock=lambda: NOW,
            lease=lease,
            name=name,
            lock=self.lock,
            audit=self.audit,
        )

    def of(self, members: dict[str, str]) -> FleetLoop:
        return FleetLoop([self.member(name, url) for name, url in members.items()], lock=self.lock)


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as s:
        yield s


def after(patches: list[Request], queue: str) -> float:
    """The deserved GPUs the last patch of ``queue`` set."""
    bodies = [p.body for p in patches if p.path.endswith(f"/queues/{queue}")]
    return float(bodies[-1]["spec"]["deserved"]["nvidia.com/gpu"])


def test_two_clusters_with_one_queue_name_get_their_own_plans_patches_leases_and_records(
    servers: dict[str, FakeApiServer], stack: ExitStack, tmp_path: Path
) -> None:
    fleet = Fleet(tmp_path, "apply", stack)
    loop = fleet.of({name: server.url for name, server in servers.items()})
    report = loop.run_once()
    assert report.failed == {} and all(r.standby == "" and r.plan for r in report.reports.values())
    # The model was asked for the qualified series only; the planner and the API saw queue names.
    assert fleet.forecaster.seen == {"a/team-a", "a/team-b", "b/team-a"}
    assert {o.change.target for o in report.reports["a"].outcomes} == {"team-a", "team-b"}
    assert {o.change.target for o in report.reports["b"].outcomes} == {"team-a"}
    a_team_a, b_team_a = after(servers["a"].patches(), "team-a"), after(servers["b"].patches(), "team-a")
    assert a_team_a > 16 and b_team_a != a_team_a  # a's team-a grew toward 22, b's was sized from 5
    assert not any("team-b" in p.path for p in servers["b"].requests)
    # One Lease per cluster, in that cluster's API only.
    assert set(servers["a"].leases) == {(NAMESPACE, "gpu-capacity-predictor-loop-a")}
    assert set(servers["b"].leases) == {(NAMESPACE, "gpu-capacity-predictor-loop-b")}
    # One audit log, every record carrying its cluster; plans and state apart.
    records = AuditLog(tmp_path / "audit.jsonl").read()
    assert {r.get("cluster") for r in records} == {"a", "b"}
    changed = {
        (r["cluster"], r["queue"]): r["after"]
        for r in records
        if r["outcome"] == "applied" and r["field"] == "deserved"
    }
    assert changed[("a", "team-a")] == a_team_a and changed[("b", "team-a")] == b_team_a
    for name, queues in (("a", {"team-a", "team-b"}), ("b", {"team-a"})):
        plan = json.loads((tmp_path / "plans" / name / "plan.json").read_text())
        assert {c["queue"] for c in plan["changes"]} == queues
        assert (tmp_path / f"audit.jsonl.{name}.state.json").exists()
    assert not (tmp_path / "plans" / "plan.json").exists() and not (tmp_path / "audit.jsonl.state.json").exists()
    # The same slot again: each cluster's slot is done (and nothing is patched twice).
    writes = servers["a"].writes + servers["b"].writes
    again = fleet.of({name: server.url for name, server in servers.items()}).run_once()
    assert all(r.skipped for r in again.reports.values())
    assert servers["a"].writes + servers["b"].writes == writes


def test_a_done_slot_of_one_cluster_is_not_the_others(
    servers: dict[str, FakeApiServer], stack: ExitStack, tmp_path: Path
) -> None:
    fleet = Fleet(tmp_path, "apply", stack)
    first = fleet.of({"a": servers["a"].url}).run_once()
    assert first.reports["a"].plan is not None
    both = fleet.of({name: server.url for name, server in servers.items()}).run_once()
    assert both.reports["a"].skipped and not both.reports["b"].skipped and both.reports["b"].outcomes
    # Cooldowns are per cluster too: a's team-a change does not cool b's team-a down.
    assert "cooldown" not in {h.code for h in both.reports["b"].plan.held}  # type: ignore[union-attr]


def test_cluster_b_api_down_a_still_applies_and_b_is_reported(
    servers: dict[str, FakeApiServer], stack: ExitStack, tmp_path: Path
) -> None:
    fleet = Fleet(tmp_path, "apply", stack)
    loop = fleet.of({"b": DOWN, "a": servers["a"].url})  # b first: its failure must not stop a
    report = loop.run_once()
    assert (
        "cannot read or renew Lease gpu-capacity-predictor/gpu-capacity-predictor-loop-b" in report.reports["b"].standby
    )
    assert [o.outcome for o in report.reports["a"].outcomes] == ["applied", "applied"]
    scraped = {
        (s.name, s.labels.get("cluster"), s.labels.get("result")): s.value
        for f in text_string_to_metric_families(generate_latest(loop.metrics.registry).decode())
        for s in f.samples
    }
    assert scraped[("predictor_loop_cycles_total", "b", "standby")] == 1
    assert scraped[("predictor_loop_cycles_total", "a", "ok")] == 1
    assert scraped[("predictor_loop_last_success_timestamp_seconds", "a", None)] == NOW.timestamp()
    assert scraped[("predictor_loop_last_success_timestamp_seconds", "b", None)] == 0
    assert loop.metrics.ready() == (True, "ok")  # one cluster down does not take the others' metrics off


def test_in_plan_mode_a_down_api_holds_that_cluster_and_a_raising_cycle_fails_it_alone(
    servers: dict[str, FakeApiServer], stack: ExitStack, tmp_path: Path
) -> None:
    fleet = Fleet(tmp_path, "plan", stack)

    class Broken:
        def history(self, now: pd.Timestamp) -> pd.DataFrame:
            raise RuntimeError("a bug in a reader")

    loop = FleetLoop(
        [fleet.member("b", DOWN), fleet.member("c", servers["b"].url, Broken()), fleet.member("a", servers["a"].url)],
        lock=fleet.lock,
    )
    report = loop.run_once()
    assert report.reports["b"].hold is not None and report.reports["b"].hold[0] == "source_down"
    assert report.failed == {"c": "RuntimeError: a bug in a reader"}
    assert report.reports["a"].plan is not None and report.reports["a"].hold is None
    records = AuditLog(tmp_path / "audit.jsonl").read()
    assert {(r["cluster"], r["outcome"], r["code"]) for r in records if r["queue"] == "*"} >= {
        ("b", "held", "source_down"),
        ("c", "failed", "error"),
        ("a", "cycle-done", ""),
    }
    assert {r["queue"] for r in records if r["cluster"] == "a" and r["outcome"] == "planned"} == {"team-a", "team-b"}
    scraped = {
        (s.name, s.labels.get("cluster"), s.labels.get("result")): s.value
        for f in text_string_to_metric_families(generate_latest(loop.metrics.registry).decode())
        for s in f.samples
    }
    assert scraped[("predictor_loop_cycles_total", "c", "error")] == 1
    assert scraped[("predictor_loop_cycles_total", "b", "held")] == 1


def test_metrics_carry_the_cluster_on_every_per_queue_series(
    servers: dict[str, FakeApiServer], stack: ExitStack, tmp_path: Path
) -> None:
    fleet = Fleet(tmp_path, "plan", stack)
    loop = fleet.of({name: server.url for name, server in servers.items()})
    loop.run_once()
    families = {f.name: f for f in text_string_to_metric_families(generate_latest(loop.metrics.registry).decode())}
    mean = {
        (s.labels["cluster"], s.labels["queue"]): s.value
        for s in families["predictor_loop_forecast_gpus"].samples
        if s.labels["band"] == "mean"
    }
    assert mean == {("a", "team-a"): 22.0, ("a", "team-b"): 41.0, ("b", "team-a"): 5.0}
    upper = {(s.labels["cluster"], s.labels["series"]) for s in families["predictor_forecast_upper"].samples}
    assert upper == {("a", "team-a"), ("a", "team-b"), ("b", "team-a")}
    quota = {s.labels["cluster"] for s in families["predictor_loop_desired_quota_gpus"].samples}
    assert quota == {"a", "b"}
    for family in families.values():  # no series without its cluster (nothing merged across clusters)
        assert all("cluster" in s.labels for s in family.samples), family.name


def test_records_of_a_named_cluster_never_count_for_the_unnamed_one(tmp_path: Path) -> None:
    """Old audit logs (no ``cluster`` on any line) stay the unnamed cluster's; a fleet's lines are apart."""
    from predictor.actuators.audit import AuditRecord

    log = AuditLog(tmp_path / "audit.jsonl")
    base = dict(
        timestamp=NOW.isoformat(),
        cycle="2026-11-02T10:00:00Z",
        field="deserved",
        before=1,
        after=2,
        reason="r",
        mode="plan",
        unix=NOW.timestamp(),
    )
    log.append(
        [
            AuditRecord(queue="team-a", outcome="planned", **base),  # type: ignore[arg-type]
            AuditRecord(queue="team-a", outcome="planned", cluster="a", **base),  # type: ignore[arg-type]
            AuditRecord(queue="*", outcome="cycle-done", cluster="a", **base),
        ]
    )  # type: ignore[arg-type]
    first = (tmp_path / "audit.jsonl").read_text().splitlines()[0]
    assert "cluster" not in json.loads(first)  # a loop without clusters writes what it always wrote
    assert log.done_cycles() == set() and log.done_cycles("a") == {"2026-11-02T10:00:00Z"}
    assert log.last_changed("plan") == {"team-a": NOW.timestamp()} == log.last_changed("plan", "a")
    assert log.last_changed("plan", "b") == {}


def kubeconfig(path: Path, servers: dict[str, str]) -> Path:
    """One kubeconfig with a context per cluster (``ctx-<name>``), as a fleet's loop is given."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": f"ctx-{next(iter(servers))}",
        "clusters": [{"name": n, "cluster": {"server": url}} for n, url in servers.items()],
        "users": [{"name": "loop", "user": {"token": "not-a-secret"}}],
        "contexts": [{"name": f"ctx-{n}", "context": {"cluster": n, "user": "loop"}} for n in servers],
    }
    path.write_text(json.dumps(doc))
    return path


def test_loop_once_from_the_cli_runs_every_cluster_on_its_own_context(
    servers: dict[str, FakeApiServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from predictor.cli import main

    config = kubeconfig(tmp_path / "kubeconfig", {"a": servers["a"].url, "b": DOWN})
    now = pd.Timestamp.now(tz="UTC")
    frames = [
        History({f"{c}/{q}": (v, FRESH) for q, v in queues.items()}).history(now) for c, queues in HISTORY.items()
    ]
    history = tmp_path / "history.csv"
    frame = pd.concat(frames)
    frame.assign(timestamp=frame["timestamp"].map(pd.Timestamp.isoformat)).to_csv(history, index=False)
    settings = tmp_path / "settings.yaml"
    settings.write_text(
        json.dumps(
            {
                "actuators": {
                    **resizing("apply"),
                    "audit_log": str(tmp_path / "audit.jsonl"),
                    "plan_dir": str(tmp_path / "plans"),
                },
                "clusters": [{"name": n, "kube_context": f"ctx-{n}", "kubeconfig": str(config)} for n in ("b", "a")],
            }
        )
    )
    args = ["loop", "--once", "--config", str(settings), "--history", str(history), "--model", "seasonal_naive_24"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "standing by" in out and "gpu-capacity-predictor-loop-b" in out  # b reported, in one line
    assert servers["a"].writes == 2 and {r.path.rsplit("/", 1)[-1] for r in servers["a"].patches()} == {
        "team-a",
        "team-b",
    }
    assert set(servers["a"].leases) == {(NAMESPACE, "gpu-capacity-predictor-loop-a")}
    assert {r.get("cluster") for r in AuditLog(tmp_path / "audit.jsonl").read()} == {"a"}
    assert main([*args, "--queues", str(history)]) == 1
    assert "--queues holds one cluster's queues" in capsys.readouterr().err


def test_run_forever_cycles_every_cluster_renews_each_lease_and_gives_them_up(
    servers: dict[str, FakeApiServer], stack: ExitStack, tmp_path: Path
) -> None:
    fleet = Fleet(tmp_path, "apply", stack)
    loop = fleet.of({name: server.url for name, server in servers.items()})
    sleeps: list[float] = []
    loop.run_forever(lambda: len(sleeps) >= 3, sleep=sleeps.append, renew_every_s=600)
    assert len(sleeps) == 3  # one cycle, then the wait to the next slot in 600 s steps, renewing between
    done = [r for r in AuditLog(tmp_path / "audit.jsonl").read() if r["outcome"] == "cycle-done"]
    assert sorted(r["cluster"] for r in done) == ["a", "b"]
    for name, server in servers.items():
        lease = server.leases[(NAMESPACE, f"gpu-capacity-predictor-loop-{name}")]
        assert lease["spec"].get("holderIdentity") is None  # given up when the loop stopped
        puts = [r for r in server.requests if r.method == "PUT" and "leases" in r.path]
        assert len(puts) >= 3  # renewed between the steps (and released at the end)
    probe = FileLock(tmp_path / "audit.jsonl.lock", identity="probe")
    assert probe.acquire(NOW) == ""  # the shared local lock is free again
    probe.release()


def test_plan_offline_for_one_cluster_of_a_fleet_file_is_the_plan_of_its_rows_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from predictor.cli import main

    history = pd.concat(
        [History({f"{c}/{q}": (v, FRESH) for q, v in queues.items()}).history(NOW) for c, queues in HISTORY.items()]
    )
    forecast, _ = Flat().forecast(history, horizon=24)
    fleet_file, alone_file = tmp_path / "fleet.csv", tmp_path / "alone.csv"
    forecast.to_csv(fleet_file, index=False)
    mine = forecast[forecast["series_id"].str.startswith("b/")]
    mine.assign(series_id=mine["series_id"].str.removeprefix("b/")).to_csv(alone_file, index=False)
    queues = tmp_path / "queues.json"
    opt_in = {"gpu-capacity-predictor/managed": "true"}
    team_a = queue_object("team-a", deserved=4, capability=8, guarantee=2, annotations=opt_in)
    queues.write_text(json.dumps({"items": [team_a]}))
    settings = tmp_path / "fleet.yaml"
    settings.write_text(json.dumps({"clusters": [{"name": "a"}, {"name": "b"}]}))
    common = ["plan", "--queues", str(queues), "--now", NOW.isoformat()]
    assert (
        main(
            [
                *common,
                "--forecast",
                str(fleet_file),
                "--out",
                str(tmp_path / "b"),
                "--cluster",
                "b",
                "--config",
                str(settings),
            ]
        )
        == 0
    )
    assert main([*common, "--forecast", str(alone_file), "--out", str(tmp_path / "alone")]) == 0
    assert (tmp_path / "b" / "plan.json").read_text() == (tmp_path / "alone" / "plan.json").read_text()
    assert json.loads((tmp_path / "b" / "plan.json").read_text())["changes"]  # b's forecast (5) moved team-a
    capsys.readouterr()
    assert (
        main(
            [
                *common,
                "--forecast",
                str(fleet_file),
                "--out",
                str(tmp_path / "c"),
                "--cluster",
                "c",
                "--config",
                str(settings),
            ]
        )
        == 1
    )
    assert capsys.readouterr().err.strip() == "error: --cluster c: the settings list a, b"


def test_loop_once_with_a_one_cluster_history_file_or_a_missing_kubeconfig_says_which_input(
    servers: dict[str, FakeApiServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from predictor.cli import main

    config = kubeconfig(tmp_path / "kubeconfig", {n: s.url for n, s in servers.items()})
    history = tmp_path / "history.csv"
    frame = History({"team-a": (22.0, FRESH)}).history(pd.Timestamp.now(tz="UTC"))  # no "a/": a one-cluster file
    frame.assign(timestamp=frame["timestamp"].map(pd.Timestamp.isoformat)).to_csv(history, index=False)
    clusters = [{"name": n, "kube_context": f"ctx-{n}", "kubeconfig": str(config)} for n in ("a", "b")]
    settings = tmp_path / "settings.yaml"
    plans = tmp_path / "plans"
    actuators = {**resizing("plan"), "audit_log": str(tmp_path / "audit.jsonl"), "plan_dir": str(plans)}
    settings.write_text(json.dumps({"actuators": actuators, "clusters": clusters}))
    args = ["loop", "--once", "--config", str(settings), "--history", str(history), "--model", "seasonal_naive_24"]
    assert main(args) == 1
    captured = capsys.readouterr()
    assert f"a: failed: --history {history}: no series names its cluster" in captured.out
    assert "'team-a'" in captured.out
    assert "2 of 2 clusters failed their cycle: a, b" in captured.err
    assert not plans.exists() or not any(plans.rglob("*.yaml"))  # nothing planned from the wrong file

    missing = tmp_path / "no-such-kubeconfig"
    settings.write_text(json.dumps({"actuators": actuators, "clusters": [{**clusters[0], "kubeconfig": str(missing)}]}))
    assert main(args) == 1
    assert capsys.readouterr().err.strip() == f"error: clusters a: kubeconfig {missing}: no such file"
