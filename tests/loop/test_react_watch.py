"""The live loop's watch between slots (predictor.loop.react, predictor.loop.waiting): when and how it reads.

It reads nothing with the defaults or for a resource other than GPUs; it polls every ``react_poll_s``
(bounded) while the locks are renewed on their own schedule, and only while this instance leads; a failing or
unexpected read keeps the loop waiting; a clock stepped back neither stops the polls nor restarts a queue's
wait, a wait ends by the sleeps even when the clock stands still, and a loop that leads again after standing by
counts the wait from then.

The clock, workload reader and loop builder come from ``test_react``, the ``fake`` and ``api`` fixtures from
this package's conftest.
"""

from __future__ import annotations

import logging
from itertools import pairwise
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from kubernetes import client

from predictor.actuators.audit import AuditLog
from predictor.actuators.volcano import VolcanoActuator
from predictor.config import load_settings
from predictor.errors import ConfigError, DataSourceError
from predictor.loop import Loop
from predictor.loop.waiting import wait_and_watch
from predictor.planner.workload import Workload
from tests.actuators.fake_apiserver import FakeApiServer
from tests.loop.test_loop import Flat, History
from tests.loop.test_react import (
    BURST,
    END,
    NOW,
    REACT,
    RUNNING,
    WAITING,
    Clock,
    CountedCluster,
    Jobs,
    done,
    make_loop,
    run_through_next_slot,
)
from tests.support.actuators import resizing


def test_with_defaults_nothing_extra_is_read_or_planned(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    clock = Clock(NOW)
    jobs = Jobs()
    loop, cluster = make_loop(tmp_path, api, clock, jobs)
    assert not loop.react.enabled
    records = run_through_next_slot(loop, clock)
    assert done(records) == ["2026-11-02T10:00:00Z", "2026-11-02T11:00:00Z"]
    assert jobs.reads == 2 and cluster.reads == 2  # one read of each per slot's cycle, none between
    assert not [r for r in records if r["outcome"] == "react" or "+react-" in r["cycle"]]
    assert not [r for r in records if r.get("code") == "pending_raise"]
    assert loop.metrics.react_cycles._value.get() == 0


def test_a_failing_read_between_slots_keeps_the_loop_waiting(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    clock = Clock(NOW)
    jobs = Jobs(error=DataSourceError("kube-state-metrics: connection refused"), failing=NOW + pd.Timedelta(seconds=1))
    loop, _ = make_loop(tmp_path, api, clock, jobs, planner=REACT)
    records = run_through_next_slot(loop, clock)
    assert done(records) == ["2026-11-02T10:00:00Z", "2026-11-02T11:00:00Z"]
    assert not [r for r in records if r["outcome"] in ("react", "failed")]
    assert loop.metrics.react_read_failures._value.get() == 44  # one a minute: 10:21 to 11:00, then 11:01 to 11:04


@pytest.mark.parametrize("poll_s", [0, 0.5, 3601])
def test_react_poll_s_is_bounded(poll_s: float) -> None:
    assert load_settings(None).loop.react_poll_s == 60
    with pytest.raises(ConfigError, match="react_poll_s"):
        load_settings(None, loop={"react_poll_s": poll_s})


@pytest.mark.parametrize("error", [ValueError("bad kube-state-metrics frame"), KeyError("pod")])
def test_an_unexpected_error_in_a_read_between_slots_is_a_failed_read_not_a_failed_cycle(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path, caplog: pytest.LogCaptureFixture, error: Exception
) -> None:
    clock = Clock(NOW)
    jobs = Jobs(error=error, failing=NOW + pd.Timedelta(seconds=1))
    loop, _ = make_loop(tmp_path, api, clock, jobs, planner=REACT)
    loop.workload = None  # the slots' own cycles plan without a workload; only the watch's reads fail
    with caplog.at_level(logging.WARNING, logger="predictor.loop.react"):
        records = run_through_next_slot(loop, clock)
    assert done(records) == ["2026-11-02T10:00:00Z", "2026-11-02T11:00:00Z"]
    assert not [r for r in records if r["outcome"] in ("react", "failed")]
    polls = int(loop.metrics.react_read_failures._value.get())
    assert polls > 30  # one per poll, every poll of the wait
    warned = [r for r in caplog.records if "react watch" in r.getMessage()]
    assert len(warned) == 1 and type(error).__name__ in warned[0].getMessage()  # once per outage
    assert warned[0].exc_info is not None and warned[0].exc_info[1] is error  # with the traceback


class SteppingClock(Clock):
    """A wall clock that NTP sets back ``back`` once, at ``at``; ``slept`` is the time that really passed."""

    def __init__(self, start: pd.Timestamp, at: pd.Timestamp, back: pd.Timedelta) -> None:
        super().__init__(start)
        self.step_at, self.back, self.stepped, self.slept = at, back, False, 0.0

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        self.slept += seconds
        if not self.stepped and self.at >= self.step_at:
            self.at -= self.back
            self.stepped = True


class RealJobs(Jobs):
    """``Jobs`` whose gangs start waiting 5 minutes of real time in (at 10:25 on the clock before it steps)."""

    def __init__(self, clock: SteppingClock) -> None:
        super().__init__()
        self.clock = clock

    def workload(self, now: pd.Timestamp) -> Workload | None:
        self.reads += 1
        return Workload((RUNNING, *((WAITING,) if self.clock.slept >= 300 else ())), ())


def test_after_the_clock_steps_back_the_watch_polls_on_and_a_queue_keeps_its_wait(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    clock = SteppingClock(NOW, pd.Timestamp("2026-11-02T10:30:00Z"), pd.Timedelta(minutes=30))
    loop, _ = make_loop(tmp_path, api, clock, RealJobs(clock), planner=REACT)
    polled: list[float] = []  # real seconds at each poll
    read = loop.react.cluster.queue_objects

    def queue_objects() -> list[dict[str, Any]]:
        polled.append(clock.slept)
        return read()

    loop.react.cluster.queue_objects = queue_objects  # type: ignore[method-assign]
    loop.run_forever(lambda: clock.at >= END, sleep=clock.sleep)  # 11:05 on the clock: 75 minutes in
    assert clock.stepped and max(b - a for a, b in pairwise(polled)) <= 60 + 20
    # The wait for 11:00 ends when its 40 minutes have passed (10:30 on the clock): that slot is done already.
    assert done(AuditLog(loop.audit.path).read())[::2] == ["2026-11-02T10:00:00Z", "2026-11-02T11:00:00Z"]
    # team-a waits from 10:25 (real 300 s); the re-plan comes react_after_s later in real time, step or not
    # (give or take the poll the step fell in: its length is known only to a poll).
    react = [r for r in AuditLog(loop.audit.path).read() if r["outcome"] == "react"]
    assert len(react) == 1
    at = pd.Timestamp(react[0]["timestamp"]) + pd.Timedelta(minutes=30)  # on the clock before the step
    assert BURST + pd.Timedelta(seconds=1200) <= at < BURST + pd.Timedelta(seconds=1200 + 2 * (60 + 20))


def test_a_loop_that_leads_again_after_standing_by_waits_react_after_s_from_then(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    def at(hm: str) -> pd.Timestamp:
        return pd.Timestamp(f"2026-11-02T{hm}:00Z")

    class OnOff(Jobs):  # team-a waits 10:25-10:35, and again from 10:39
        def workload(self, now: pd.Timestamp) -> Workload | None:
            waiting = at("10:25") <= now < at("10:35") or now >= at("10:39")
            return Workload((RUNNING, *((WAITING,) if waiting else ())), ())

    class Lease:  # another pod holds the Lease 10:30-10:40
        def acquire(self, now: pd.Timestamp) -> str:
            return "held by pod-2" if at("10:30") <= now < at("10:40") else ""

        def check(self, now: pd.Timestamp) -> str:
            return self.acquire(now)

        def release(self) -> None:
            pass

    clock = Clock(NOW)
    loop, _ = make_loop(tmp_path, api, clock, OnOff(), planner={**REACT, "react_after_s": 600})
    loop.leaders.append(Lease())
    loop.run_forever(lambda: clock.at >= at("11:05"), sleep=clock.sleep)
    react = [pd.Timestamp(r["timestamp"]) for r in AuditLog(loop.audit.path).read() if r["outcome"] == "react"]
    # Seen waiting again at 10:40, once it leads: 10 minutes from then, not from 10:25 (it would be 10:40).
    assert len(react) == 1 and at("10:49") <= react[0] < at("10:52")


def test_for_a_resource_other_than_gpus_nothing_is_read_between_slots_and_it_says_so_once(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock(NOW)
    jobs = Jobs()
    with caplog.at_level(logging.WARNING, logger="predictor.loop.react"):
        loop, cluster = make_loop(tmp_path, api, clock, jobs, planner={**REACT, "resource": "cpu"})
        assert not loop.react.enabled
        run_through_next_slot(loop, clock)
    assert jobs.reads == 2 and cluster.reads == 2  # the slots' cycles only
    assert loop.metrics.react_read_failures._value.get() == 0
    warned = [r.getMessage() for r in caplog.records if "react_pending_gpus" in r.getMessage()]
    assert len(warned) == 1 and "planner.resource is cpu" in warned[0]


@pytest.mark.parametrize(("poll_s", "polls"), [(1, 1799), (30, 59), (45, 39), (300, 5)])
def test_polls_keep_their_period_and_the_locks_are_renewed_on_their_own_schedule(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path, poll_s: float, polls: int
) -> None:
    clock = Clock(NOW)
    settings = load_settings(
        None,
        actuators={**resizing("plan"), "audit_log": tmp_path / "audit.jsonl", "plan_dir": tmp_path / "plans"},
        planner=REACT,
        loop={"react_poll_s": poll_s},
    )
    cluster = CountedCluster(VolcanoActuator(api, timeout_s=2))
    loop = Loop(
        settings,
        cluster=cluster,
        history=History({"team-a": 22, "team-b": 41}),
        forecaster=Flat(),
        clock=clock,
        workload=Jobs(burst=NOW + pd.Timedelta(days=1)),
    )
    renewals: list[pd.Timestamp] = []
    acquire = loop.leaders[0].acquire

    def counted(now: pd.Timestamp) -> str:
        renewals.append(now)
        return acquire(now)

    loop.leaders[0].acquire = counted  # type: ignore[method-assign]
    loop.run_forever(lambda: clock.at >= pd.Timestamp("2026-11-02T10:50:00Z"), sleep=clock.sleep)
    assert cluster.reads - 1 == polls  # after the 10:20 cycle's read, every poll_s until 10:50 (stopped then)
    assert len(renewals) - 1 <= 30 * 60 / 20 + 1  # every 20 s whatever the poll period (plus the cycle's)


@pytest.mark.parametrize("standby", ["", "held by pod-2"])
def test_a_wait_ends_with_a_clock_that_stands_still_and_polls_only_while_leading(standby: str) -> None:
    slept: list[float] = []
    renewals: list[str] = []
    polls: list[float] = []

    def renew() -> str:
        renewals.append(standby)
        return standby

    wait_and_watch(
        3600,
        lambda: NOW,
        lambda: False,
        slept.append,
        renew_every_s=20,
        poll_s=60,
        renew=renew,
        watch=lambda: polls.append(sum(slept)),
    )
    assert sum(slept) == pytest.approx(2400.001)  # 10:20 to just past 11:00, by the sleeps alone
    assert len(renewals) == 2400 // 20  # every 20 s slept
    assert polls == ([] if standby else [60.0 * k for k in range(1, 41)])  # a standby instance never polls
