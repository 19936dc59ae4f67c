"""The live loop's reaction to waiting gangs (predictor.loop.react): pending GPUs, the raise they bring, re-plans.

What a queue's pending GPUs are, how an hourly cycle raises a waiting queue from them (and plans on when the
workload cannot be read), and the re-plan between slots: once per wait, in plan mode as in apply mode, only
for the cluster of a fleet whose queue waits, never twice under one cycle id. The watch that decides when to
re-plan (its reads, polls, failures, clock and leadership) is in ``test_react_watch``.

Against the fake API server over HTTP (``tests.actuators.fake_apiserver``, served by the ``fake`` and ``api``
fixtures of this package's conftest), with a workload reader that returns gangs (kube-state-metrics in
production) and a clock that ``sleep`` moves forward, so ``run_forever`` crosses a whole slot in no time.
The clock, workload reader and loop builder here serve ``test_react_watch`` too.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from kubernetes import client

from predictor.actuators.audit import AuditLog
from predictor.actuators.volcano import VolcanoActuator
from predictor.config import load_settings
from predictor.errors import DataSourceError
from predictor.loop import FileLock, KubeCluster, Loop
from predictor.loop.fleet import FleetLoop, cluster_settings
from predictor.loop.react import pending_gpus, react_cycle, with_pending
from predictor.planner import QueueState
from predictor.planner.workload import JobSummary, Workload
from tests.actuators.fake_apiserver import FakeApiServer, serve_team_queues
from tests.loop.test_loop import Flat, History
from tests.support.actuators import resizing

GPU = "nvidia.com/gpu"
NOW = pd.Timestamp("2026-11-02T10:20:00Z")
BURST = NOW + pd.Timedelta(minutes=5)  # the pending gangs arrive after the 10:00 slot's cycle
END = pd.Timestamp("2026-11-02T11:05:00Z")
RUNNING = JobSummary("team-b", "ml/serve", pods=2, gpus_per_pod=4, phase="running")
WAITING = JobSummary("team-a", "ml/burst", pods=8, gpus_per_pod=4)  # 32 GPUs pending


class Clock:
    """The loop's clock; ``sleep`` moves it (what a real sleep does to the wall clock)."""

    def __init__(self, at: pd.Timestamp) -> None:
        self.at, self.sleeps = at, 0

    def __call__(self) -> pd.Timestamp:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.at += pd.Timedelta(seconds=seconds)
        self.sleeps += 1


class Jobs:
    """A workload reader: ``RUNNING`` always, ``WAITING`` from ``BURST`` on; ``error`` fails reads from ``failing``."""

    def __init__(
        self, *, error: Exception | None = None, failing: pd.Timestamp | None = None, burst: pd.Timestamp = BURST
    ) -> None:
        self.error, self.failing, self.burst, self.reads = error, failing, burst, 0

    def workload(self, now: pd.Timestamp) -> Workload | None:
        self.reads += 1
        if self.error is not None and (self.failing is None or now >= self.failing):
            raise self.error
        return Workload((RUNNING, *((WAITING,) if now >= self.burst else ())), ())


class CountedCluster(KubeCluster):
    """The live cluster, counting queue-list reads."""

    def __init__(self, actuator: VolcanoActuator) -> None:
        super().__init__(actuator)
        self.reads = 0

    def queue_objects(self) -> list[dict[str, Any]]:
        self.reads += 1
        return super().queue_objects()


REACT = {"react_pending_gpus": 8, "react_after_s": 1200, "pending_raise": "lift"}


def make_loop(
    tmp_path: Path,
    api: client.ApiClient,
    clock: Clock,
    jobs: Jobs,
    *,
    mode: str = "apply",
    planner: dict[str, Any] | None = None,
) -> tuple[Loop, CountedCluster]:
    settings = load_settings(
        None,
        actuators={**resizing(mode), "audit_log": tmp_path / "audit.jsonl", "plan_dir": tmp_path / "plans"},
        planner=planner or {},
        loop={"react_poll_s": 60},
    )
    actuator = VolcanoActuator(api, timeout_s=2)
    cluster = CountedCluster(actuator)
    return Loop(
        settings,
        cluster=cluster,
        history=History({"team-a": 22, "team-b": 41}),
        forecaster=Flat(),
        actuator=actuator,
        clock=clock,
        workload=jobs,
    ), cluster


def run_through_next_slot(loop: Loop, clock: Clock) -> list[dict[str, Any]]:
    """``run_forever`` from 10:20 past the 11:00 slot's cycle, stopped at 11:05; the audit log."""
    loop.run_forever(lambda: clock.at >= END, sleep=clock.sleep)
    return AuditLog(loop.audit.path).read()


def done(records: list[dict[str, Any]]) -> list[str]:
    return [r["cycle"] for r in records if r["outcome"] == "cycle-done"]


def test_pending_is_what_pending_gangs_ask_for_and_unknown_without_a_workload() -> None:
    workload = Workload((RUNNING, WAITING, JobSummary("team-a", "ml/one", pods=1, gpus_per_pod=2)), ())
    assert pending_gpus(workload, GPU) == {"team-a": 34.0, "team-b": 0.0}  # team-b listed, nothing waiting: 0
    assert pending_gpus(None, GPU) is None  # unknown, never 0
    assert pending_gpus(workload, "cpu") is None  # the workload counts GPUs only
    queues = [QueueState("team-a", deserved={GPU: 16}), QueueState("team-b"), QueueState("team-c")]
    filled = {q.name: dict(q.pending) for q in with_pending(queues, workload, GPU)}
    assert filled == {"team-a": {GPU: 34.0}, "team-b": {GPU: 0.0}, "team-c": {}}  # team-c not listed: unknown
    assert with_pending(queues, None, GPU) == queues


def test_the_live_cycle_raises_a_waiting_queue_from_the_workload_and_not_when_its_read_fails(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    clock = Clock(NOW)
    broken, _ = make_loop(
        tmp_path / "unknown", api, clock, Jobs(burst=NOW, error=DataSourceError("ksm down")), mode="plan", planner=REACT
    )
    plan = broken.run_once().plan
    assert plan is not None and fake.patches() == []
    assert [(c.field, c.after, c.code) for c in plan.changes if c.queue == "team-a" and c.field == "deserved"] == [
        ("deserved", 24.0, "max_step")
    ]  # pending unknown: the forecast's raise, one step
    loop, _ = make_loop(tmp_path / "known", api, clock, Jobs(burst=NOW), planner=REACT)
    plan = loop.run_once().plan
    assert plan is not None
    raised = [c for c in plan.changes if c.queue == "team-a" and c.field == "deserved"]
    assert [c.code for c in raised] == ["pending_raise"] and raised[0].after == 42  # allocated 10 + pending 32
    assert "allocated + pending GPUs 42" in raised[0].reason


def test_malformed_workload_data_in_an_hourly_cycle_leaves_pending_unknown_and_the_cycle_runs(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock(NOW)
    loop, _ = make_loop(
        tmp_path, api, clock, Jobs(burst=NOW, error=ValueError("bad ksm frame")), mode="plan", planner=REACT
    )
    with caplog.at_level(logging.WARNING, logger="predictor.loop.cycle"):
        plan = loop.run_once().plan
    assert plan is not None  # the cycle planned: an unreadable workload is unknown, not a failed cycle
    assert [(c.after, c.code) for c in plan.changes if c.queue == "team-a" and c.field == "deserved"] == [
        (24.0, "max_step")
    ]  # pending unknown: the forecast's raise, one step (as when the read is down)
    records = AuditLog(loop.audit.path).read()
    assert not [r for r in records if r["outcome"] == "failed"] and len(done(records)) == 1
    assert any("workload unreadable" in r.message and r.exc_info for r in caplog.records)


def test_a_queue_waiting_past_react_after_s_is_replanned_once_between_slots(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    clock = Clock(NOW)
    loop, _ = make_loop(tmp_path, api, clock, Jobs(), planner=REACT)
    records = run_through_next_slot(loop, clock)
    react = [r for r in records if r["outcome"] == "react"]
    assert len(react) == 1 and "team-a" in react[0]["reason"] and react[0]["code"] == "react"
    cycle = react[0]["cycle"]
    assert cycle.startswith("2026-11-02T10:00:00Z+react-")
    at = pd.Timestamp(react[0]["timestamp"])
    assert BURST + pd.Timedelta(seconds=1200) <= at < BURST + pd.Timedelta(seconds=1200 + 60 + 20)
    assert cycle == react_cycle("2026-11-02T10:00:00Z", at)
    # The re-plan raised team-a past its cooldown (applied at 10:20) to what its gangs ask for, and applied it.
    raised = [r for r in records if r["cycle"] == cycle and r["outcome"] == "applied"]
    assert [(r["queue"], r["field"], r["after"], r["code"]) for r in raised] == [
        ("team-a", "deserved", 42.0, "pending_raise")
    ]
    assert fake.queues["team-a"]["spec"]["deserved"][GPU] == "42"
    # Each slot ran once; the re-plan is a cycle of its own.
    assert done(records) == ["2026-11-02T10:00:00Z", cycle, "2026-11-02T11:00:00Z"]
    assert loop.metrics.react_cycles._value.get() == 1


def test_in_plan_mode_a_replan_plans_and_applies_nothing(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    clock = Clock(NOW)
    loop, _ = make_loop(tmp_path, api, clock, Jobs(), mode="plan", planner=REACT)
    records = run_through_next_slot(loop, clock)
    assert fake.patches() == []
    react = [r for r in records if r["outcome"] == "react"]
    assert len(react) == 1 and "team-a" in react[0]["reason"]
    planned = [r for r in records if r["cycle"] == react[0]["cycle"] and r["outcome"] == "planned"]
    assert ("team-a", "deserved", "pending_raise", "plan") in [
        (r["queue"], r["field"], r["code"], r["mode"]) for r in planned
    ]
    assert not [r for r in records if r["outcome"] in ("intent", "applied")]
    assert done(records).count("2026-11-02T11:00:00Z") == 1


def test_a_fleet_replans_between_slots_only_the_cluster_whose_queue_waits(tmp_path: Path) -> None:
    clock = Clock(NOW)
    settings = load_settings(
        None,
        actuators={**resizing("plan"), "audit_log": tmp_path / "audit.jsonl", "plan_dir": tmp_path / "plans"},
        planner=REACT,
    )
    audit = AuditLog(settings.actuators.audit_log)
    lock = FileLock(audit.path.with_name(audit.path.name + ".lock"), identity="pod-1")
    never = NOW + pd.Timedelta(days=1)  # cluster b's gangs never wait
    with (
        serve_team_queues() as a,
        serve_team_queues() as b,
        client.ApiClient(client.Configuration(host=a.url)) as api_a,
        client.ApiClient(client.Configuration(host=b.url)) as api_b,
    ):
        loops = [
            Loop(
                cluster_settings(settings, name),
                cluster=KubeCluster(VolcanoActuator(api, timeout_s=2)),
                history=History({"team-a": 22, "team-b": 41}),
                forecaster=Flat(),
                clock=clock,
                workload=Jobs(burst=burst),
                name=name,
                lock=lock,
                audit=audit,
            )
            for name, api, burst in (("a", api_a, BURST), ("b", api_b, never))
        ]
        FleetLoop(loops, lock=lock).run_forever(lambda: clock.at >= END, sleep=clock.sleep)
        assert a.patches() == [] and b.patches() == []
    records = audit.read()
    react = [r for r in records if r["outcome"] == "react"]
    assert [(r["cluster"], "team-a" in r["reason"]) for r in react] == [("a", True)]
    for cluster in ("a", "b"):
        slots = [
            r["cycle"]
            for r in records
            if r["outcome"] == "cycle-done" and r["cluster"] == cluster and "+react-" not in r["cycle"]
        ]
        assert slots == ["2026-11-02T10:00:00Z", "2026-11-02T11:00:00Z"]
    assert loops[0].metrics.react_cycles._value.get() == 1 and loops[1].metrics.react_cycles._value.get() == 0


def test_a_second_replan_with_the_same_cycle_id_is_skipped_and_neither_audited_nor_counted(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    clock = Clock(NOW)
    loop, _ = make_loop(tmp_path, api, clock, Jobs(burst=NOW), planner=REACT)
    loop._forever = True  # keep the lock between the calls, as run_forever does
    loop.run_once()
    first, second = loop.run_react(["team-a"]), loop.run_react(["team-a"])  # the same second: the same id
    assert first.cycle == second.cycle and not first.skipped and second.skipped
    records = AuditLog(loop.audit.path).read()
    assert [r["cycle"] for r in records if r["outcome"] == "react"] == [first.cycle]
    assert done(records).count(first.cycle) == 1
    assert loop.metrics.react_cycles._value.get() == 1
