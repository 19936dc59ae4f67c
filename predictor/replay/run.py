"""One replay: a job table through the Volcano-like simulator under one quota policy, hour by hour.

Policies (the ``--policy`` values):
- ``static-hard``: deserved = each queue's share of GPU-time in the week before the replay, capability =
  deserved (what a team sets by hand, no borrowing);
- ``static-elastic``: the same deserved, capability = the cluster (borrow anything idle; reclaimed when
  the lender needs it back);
- ``loop``: starts as static-hard; every hour one ``predictor.planner.plan_cycle`` — the loop's planning
  call — sets guarantee, deserved and capability from a forecast retrained weekly on past history only;
- ``rightsize+loop``: ``loop`` on jobs whose GPU requests right-sizing changed (``rightsize.py``);
- ``oracle``: ``loop`` planning from the true future demand: the upper bound of the planner's rules.

Every policy runs with Volcano's ``reclaim`` and ``preempt`` actions (the capacity plugin's documented
configuration), so borrowing has its real cost, and with the same warm-up week before ``start``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np
import pandas as pd

from predictor.bounds import MAX_GPUS
from predictor.errors import InputError
from predictor.planner import Memory, PlannerSettings, QueueState, plan_cycle
from predictor.planner.react import PendingWatch
from predictor.replay.demand import History, OracleForecaster, WeeklyAuto, zero_wait_demand
from predictor.replay.measures import FragmentationSampler, summarise
from predictor.replay.rightsize import rightsized_jobs, used_gpus
from predictor.sim import ClusterSpec, QueueSpec, Scheduler, SchedulerResult, VolcanoSettings
from predictor.sim.series import epoch_s

__all__ = ["POLICIES", "ReplayResult", "ReplaySettings", "replay", "replay_quotas", "static_queues"]

POLICIES = ("static-hard", "static-elastic", "loop", "rightsize+loop", "oracle")
PLANNED = ("loop", "rightsize+loop", "oracle")
HOUR = pd.Timedelta(hours=1)
WEEK = pd.Timedelta(days=7)
# How often the replayed controller looks at pending GPUs between hourly cycles (planner.react_pending_gpus):
# a controller's resync period; the scheduler itself runs every ``Scheduler.period_s`` regardless.
TICK = pd.Timedelta(minutes=5)


@dataclass(frozen=True)
class ReplaySettings:
    """A replay's cluster, window and policy. ``checkpoint_s``/``restart_s`` apply to jobs whose table does
    not state their own (``checkpoint_s``, ``restart_s`` columns)."""

    nodes: int
    start: pd.Timestamp
    weeks: float
    policy: str
    gpus_per_node: int = 8
    seed: int = 0
    checkpoint_s: float = 3600.0
    restart_s: float = 300.0
    planner: PlannerSettings = field(default_factory=lambda: PlannerSettings())  # type: ignore[call-arg]

    def check(self) -> None:
        if self.policy not in POLICIES:
            raise InputError(f"--policy {self.policy!r} is not one of {', '.join(POLICIES)}")
        if self.nodes < 1:
            raise InputError(f"--nodes must be >= 1, got {self.nodes}")
        if self.gpus_per_node < 1:
            raise InputError(f"--gpus-per-node must be >= 1, got {self.gpus_per_node}")
        if self.nodes * self.gpus_per_node > MAX_GPUS:
            raise InputError(f"--nodes {self.nodes} × --gpus-per-node {self.gpus_per_node} is above {MAX_GPUS:g} GPUs")
        if not (0 < self.weeks <= 60):
            raise InputError(f"--weeks must be in (0, 60], got {self.weeks:g}")


@dataclass
class ReplayResult:
    """A finished replay: the summary, the schedule, and what the policy did."""

    summary: dict[str, float]
    queues: list[QueueSpec]
    schedule: SchedulerResult | None = None
    rightsized_jobs: int = 0
    cycles: int = 0
    held_cycles: int = 0
    quota_changes: int = 0
    react_cycles: int = 0  # event-driven re-plans between hourly cycles (planner.react_pending_gpus)


class _Forecaster(Protocol):
    def retrain(self, history: pd.DataFrame) -> None: ...

    def forecast(self, history: pd.DataFrame, *, now: pd.Timestamp, horizon: int) -> pd.DataFrame: ...


def static_queues(jobs: pd.DataFrame, start: pd.Timestamp, total: int, *, hard: bool) -> list[QueueSpec]:
    """Deserved = each queue's share of GPU-time submitted in the week before ``start``, at least 1 GPU."""
    week = jobs[(jobs["submit"] >= start - WEEK) & (jobs["submit"] < start)]
    gpu_time = (week["num_gpus"] * week["duration_s"]).groupby(week["queue"]).sum()
    share = gpu_time / gpu_time.sum() if gpu_time.sum() > 0 else gpu_time
    specs = []
    for name in sorted(jobs["queue"].astype(str).unique()):
        deserved = max(1.0, math.floor(float(share.get(name, 0.0)) * total))
        specs.append(QueueSpec(name, deserved=deserved, capability=deserved if hard else float(total)))
    return specs


def replay(jobs: pd.DataFrame, settings: ReplaySettings) -> ReplayResult:
    """Replay ``jobs`` (a normalised job table) from ``settings.start`` for ``settings.weeks`` weeks."""
    settings.check()
    start = pd.Timestamp(settings.start)
    start = start.tz_localize("UTC") if start.tzinfo is None else start.tz_convert("UTC")
    end = start + pd.Timedelta(weeks=settings.weeks)
    window = jobs[(jobs["submit"] >= start - WEEK) & (jobs["submit"] < end)].reset_index(drop=True)
    if not (window["submit"] >= start).any():
        raise InputError(
            f"no job is submitted between {start.isoformat()} and {end.isoformat()} (the table spans "
            f"{jobs['submit'].min().isoformat()} to {jobs['submit'].max().isoformat()})"
        )
    cluster = ClusterSpec.uniform(settings.nodes, gpus_per_node=settings.gpus_per_node)
    total = cluster.n_gpus
    used_by_job = pd.Series(used_gpus(window, cluster.gpus_per_node, settings.seed), index=window["job_id"].to_numpy())
    table, changed = (
        rightsized_jobs(window, start, cluster.gpus_per_node, settings.seed)
        if settings.policy == "rightsize+loop"
        else (window, 0)
    )
    specs = static_queues(window, start, total, hard=settings.policy != "static-elastic")
    out = ReplayResult(summary={}, queues=specs, rightsized_jobs=changed)

    def plan_with(sched: Scheduler) -> _Hooks | None:
        if settings.policy not in PLANNED:
            return None
        planner = _Planner(sched, specs, settings, window, start, end, total)
        tick = (lambda t: planner.react(t, out)) if settings.planner.react_pending_gpus > 0 else None
        return _Hooks(lambda t: planner.cycle(t, out), tick)

    out.summary, out.schedule = _run(table, specs, cluster, settings, start, end, used_by_job, plan_with)
    return out


def replay_quotas(
    jobs: pd.DataFrame, specs: list[QueueSpec], settings: ReplaySettings, end: pd.Timestamp
) -> dict[str, float]:
    """The summary of ``jobs`` replayed on fixed quotas ``specs`` over ``[settings.start, end)`` (what-if runs:
    the same jobs under today's quotas and under recommended ones). ``settings.policy`` is not used."""
    start = pd.Timestamp(settings.start)
    window = jobs[(jobs["submit"] >= start - WEEK) & (jobs["submit"] < end)].reset_index(drop=True)
    if window.empty:
        raise InputError(f"what-if: no job is submitted between {(start - WEEK).isoformat()} and {end.isoformat()}")
    cluster = ClusterSpec.uniform(settings.nodes, gpus_per_node=settings.gpus_per_node)
    used = pd.Series(used_gpus(window, cluster.gpus_per_node, settings.seed), index=window["job_id"].to_numpy())
    summary, _ = _run(window, specs, cluster, settings, start, end, used, lambda sched: None)
    return summary


_Hook = Callable[[pd.Timestamp], None]


class _Hooks(NamedTuple):
    """What a policy does on the hour, and at every ``TICK`` between hours (``None``: nothing)."""

    hourly: _Hook
    tick: _Hook | None


def _run(
    table: pd.DataFrame,
    specs: list[QueueSpec],
    cluster: ClusterSpec,
    settings: ReplaySettings,
    start: pd.Timestamp,
    end: pd.Timestamp,
    used_by_job: pd.Series,
    hook: Callable[[Scheduler], _Hooks | None],
) -> tuple[dict[str, float], SchedulerResult]:
    """Schedule ``table`` from a week before ``start`` to ``end``, sampling fragmentation and calling the
    policy hooks every hour of the window (and every ``TICK`` between, if it has one); the summary over
    ``[start, end)``."""
    volcano = VolcanoSettings(
        reclaim=True, preempt=True, checkpoint_s=settings.checkpoint_s, restart_s=settings.restart_s
    )
    sched = Scheduler(table, cluster, specs, start=start - WEEK, volcano=volcano)
    sampler = FragmentationSampler(table["num_gpus"].to_numpy(), cluster.gpus_per_node)
    hooks = hook(sched)
    for t in pd.date_range(start, end, freq="h", inclusive="left"):
        sched.run_until(t)
        sampler.sample(sched.free_per_node())
        if hooks is None:
            continue
        hooks.hourly(t)
        if hooks.tick is not None:
            for u in pd.date_range(t + TICK, min(t + HOUR, end), freq=TICK, inclusive="left"):
                sched.run_until(u)
                hooks.tick(u)
    sched.run_until(end)
    result = sched.result()
    used = np.minimum(
        used_by_job.reindex(sched.jobs["job_id"].to_numpy()).fillna(1).to_numpy(), sched.jobs["num_gpus"].to_numpy()
    )
    summary = summarise(
        result,
        start=start,
        end=end,
        capacity=cluster.n_gpus,
        used_gpus=used.astype(float),
        submit_s=epoch_s(sched.jobs["submit"]),
        sampler=sampler,
    )
    return summary, result


class _Planner:
    """The loop's planning call against the simulated queues, once per simulated hour."""

    def __init__(
        self,
        sched: Scheduler,
        specs: list[QueueSpec],
        settings: ReplaySettings,
        jobs: pd.DataFrame,
        start: pd.Timestamp,
        end: pd.Timestamp,
        total: int,
    ) -> None:
        self.sched, self.settings, self.start, self.total = sched, settings.planner, start, total
        self.resource = settings.planner.resource
        self.quota = {s.name: (s.guarantee, s.deserved, s.capability) for s in specs}
        self.reclaimable = {s.name: s.reclaimable for s in specs}
        self.horizon = math.ceil(settings.planner.horizon_h) + 1
        self.history = History(zero_wait_demand(jobs, start - WEEK, start))
        self.forecaster: _Forecaster = (
            OracleForecaster(jobs, start, end, self.horizon) if settings.policy == "oracle" else WeeklyAuto()
        )
        self.memory = Memory()
        self.last_changed: dict[str, float] = {}
        self.watch = PendingWatch(settings.planner)

    def states(self) -> list[QueueState]:
        allocated, pending = self.sched.allocated, self.sched.pending
        r = self.resource
        return [
            QueueState(
                name=name,
                guarantee={r: g},
                deserved={r: d},
                capability={r: c} if math.isfinite(c) else {},
                allocated={r: float(allocated[name])},
                pending={r: float(pending[name])},
                reclaimable=self.reclaimable[name],
            )
            for name, (g, d, c) in self.quota.items()
        ]

    def cycle(self, t: pd.Timestamp, out: ReplayResult) -> None:
        self.history.observe(t, self.sched.allocated, self.sched.pending)
        if (t - self.start) % WEEK == pd.Timedelta(0):
            self.forecaster.retrain(self.history.until(t - HOUR))
        self._plan(t, out)
        out.cycles += 1

    def react(self, t: pd.Timestamp, out: ReplayResult) -> None:
        """Between hourly cycles: re-plan from the same forecast (no retrain, no new history sample) when
        a queue has waited long enough beyond its deserved (``PendingWatch``)."""
        if self.watch.observe(self.states(), t.timestamp()):
            self._plan(t, out)
            out.react_cycles += 1

    def _plan(self, t: pd.Timestamp, out: ReplayResult) -> None:
        forecast = self.forecaster.forecast(self.history.until(t), now=t, horizon=self.horizon)
        plan, hold = plan_cycle(
            self.states(),
            forecast,
            self.settings,
            now=t,
            allocatable={self.resource: self.total},
            memory=self.memory,
            last_changed=self.last_changed,
        )
        self.memory = plan.memory
        out.held_cycles += hold is not None
        r = self.resource
        for name, state in plan.desired.items():
            old = self.quota[name]
            new = (state.guarantee.get(r, 0.0), state.deserved.get(r, 0.0), state.capability.get(r, math.inf))
            if new != old:
                self.quota[name] = new
                self.sched.set_quota(name, deserved=new[1], capability=new[2], guarantee=new[0])
                self.last_changed[name] = t.timestamp()
                out.quota_changes += 1
