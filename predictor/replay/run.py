"""One replay: a job table through the Volcano-like simulator under one quota policy, hour by hour.

Policies (the ``--policy`` values):
- ``static-hard``: deserved = each queue's share of GPU-time in the week before the replay, capability =
  deserved (what a team sets by hand, no borrowing);
- ``static-elastic``: the same deserved, capability = the cluster (borrow anything idle; reclaimed when
  the lender needs it back);
- ``static-weekly``: static-elastic's quotas re-estimated at every week boundary from the week before;
- ``proportion``: Volcano's proportion plugin, deserved water-filled by queue weight over the queues'
  requests at every scheduling session (every ``TICK``; ``baselines.py``);
- ``loop``: starts as static-hard; every hour one ``predictor.planner.plan_cycle`` — the loop's planning
  call — sets guarantee, deserved and capability from the forecast ``settings.forecaster`` names
  (``forecasters.py``: by default the served ``auto``, retrained weekly on past history only);
- ``rightsize+loop``: ``loop`` on jobs whose GPU requests right-sizing changed (``rightsize.py``);
- ``oracle``: ``loop`` planning from the true future demand (``loop`` with the ``oracle`` forecaster): the
  upper bound of the planner's rules.

Every policy runs with Volcano's ``reclaim`` and ``preempt`` actions (the capacity plugin's documented
configuration), so borrowing has its real cost, and with the same warm-up week before ``start``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

from predictor.bounds import MAX_GPUS
from predictor.errors import InputError, ModelError
from predictor.planner import Memory, PlannerSettings, QueuePlan, QueueState, plan_cycle
from predictor.planner.react import PendingWatch
from predictor.replay.baselines import Proportion, StaticWeekly, static_queues
from predictor.replay.demand import History, zero_wait_demand
from predictor.replay.forecasters import FORECASTERS, TRAIN_LOOKBACK, ReplayForecaster, make_forecaster
from predictor.replay.measures import FragmentationSampler, summarise
from predictor.replay.rightsize import rightsized_jobs, used_gpus
from predictor.sim import ClusterSpec, QueueSpec, Quota, Scheduler, SchedulerResult, VolcanoSettings
from predictor.sim.series import epoch_s

__all__ = ["POLICIES", "ReplayResult", "ReplaySettings", "replay", "replay_quotas", "static_queues"]

POLICIES = ("static-hard", "static-elastic", "static-weekly", "proportion", "loop", "rightsize+loop", "oracle")
PLANNED = ("loop", "rightsize+loop", "oracle")
HARD = ("static-hard", *PLANNED)  # the planned policies start from static-hard's quotas
HOUR = pd.Timedelta(hours=1)
WEEK = pd.Timedelta(days=7)
# How often the replayed controller looks at pending GPUs between hourly cycles (planner.react_pending_gpus):
# a controller's resync period; the scheduler itself runs every ``Scheduler.period_s`` regardless.
TICK = pd.Timedelta(minutes=5)


@dataclass(frozen=True)
class ReplaySettings:
    """A replay's cluster, window and policy. ``checkpoint_s``/``restart_s`` apply to jobs whose table does
    not state their own (``checkpoint_s``, ``restart_s`` columns). ``forecaster``: what the planned policies
    forecast with (``oracle`` for ``--policy oracle`` whatever it says); ``queue_weights``: ``proportion``'s
    queue weights (1 for a queue not named)."""

    nodes: int
    start: pd.Timestamp
    weeks: float
    policy: str
    gpus_per_node: int = 8
    seed: int = 0
    checkpoint_s: float = 3600.0
    restart_s: float = 300.0
    planner: PlannerSettings = field(default_factory=lambda: PlannerSettings())  # type: ignore[call-arg]
    forecaster: str = "auto"
    queue_weights: dict[str, int] = field(default_factory=dict)

    @property
    def planning_forecaster(self) -> str:
        """The forecaster a planned policy uses (``--policy oracle`` is ``loop`` with the oracle's)."""
        return "oracle" if self.policy == "oracle" else self.forecaster

    def check(self) -> None:
        if self.policy not in POLICIES:
            raise InputError(f"--policy {self.policy!r} is not one of {', '.join(POLICIES)}")
        if self.forecaster not in FORECASTERS:
            raise InputError(f"--forecaster {self.forecaster!r} is not one of {', '.join(FORECASTERS)}")
        for queue, weight in self.queue_weights.items():
            if isinstance(weight, bool) or not isinstance(weight, int) or weight < 1:
                raise InputError(f"--queue-weight {queue}={weight!r}: a queue weight is an integer >= 1")
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
    retrain_s: list[float] = field(default_factory=list)  # wall seconds of each forecaster retrain
    forecaster: str = ""  # the forecaster the plan used ("" for the policies without one)


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
    unknown = sorted(set(settings.queue_weights) - set(window["queue"].astype(str)))
    if unknown:
        raise InputError(f"--queue-weight: no queue named {unknown[0]!r} submits jobs in the replay")
    specs = static_queues(window, start, total, hard=settings.policy in HARD)
    out = ReplayResult(summary={}, queues=specs, rightsized_jobs=changed)
    past = jobs[(jobs["submit"] < start) & jobs["queue"].isin(set(window["queue"]))]

    baseline: list[Proportion | StaticWeekly] = []  # the forecast-free policy, for its quota-change count

    def plan_with(sched: Scheduler) -> _Hooks | None:
        if settings.policy == "proportion":
            proportion = Proportion(sched, settings.queue_weights, total)
            baseline.append(proportion)
            return _Hooks(proportion.session, proportion.session)  # every session: the hour and each TICK
        if settings.policy == "static-weekly":
            weekly = StaticWeekly(sched, window, start, total)
            baseline.append(weekly)
            return _Hooks(weekly.hourly, None)
        if settings.policy not in PLANNED:
            return None
        planner = _Planner(sched, specs, settings, window, past, start, end, total)
        out.forecaster = settings.planning_forecaster
        tick = (lambda t: planner.react(t, out)) if settings.planner.react_pending_gpus > 0 else None
        return _Hooks(lambda t: planner.cycle(t, out), tick)

    out.summary, out.schedule = _run(table, specs, cluster, settings, start, end, used_by_job, plan_with)
    out.quota_changes += sum(b.changes for b in baseline)
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
        past: pd.DataFrame,
        start: pd.Timestamp,
        end: pd.Timestamp,
        total: int,
    ) -> None:
        """``jobs``: the replayed ones (the oracle's future); ``past``: every job submitted before ``start``
        (the history the forecasters are seeded with, as far back as the training job reads)."""
        self.sched, self.settings, self.start, self.total = sched, settings.planner, start, total
        self.resource = settings.planner.resource
        self.quota = {s.name: Quota(s.deserved, s.capability, s.guarantee) for s in specs}
        self.reclaimable = {s.name: s.reclaimable for s in specs}
        self.horizon = math.ceil(settings.planner.horizon_h) + 1
        first = past["submit"].min().floor("h") if len(past) else start
        seed_from = min(start - WEEK, max(start - TRAIN_LOOKBACK, first))
        self.history = History(zero_wait_demand(past, seed_from, start))
        self.forecaster: ReplayForecaster = make_forecaster(
            settings.planning_forecaster, jobs, start, end, self.horizon
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
                guarantee={r: q.guarantee or 0.0},
                deserved={r: q.deserved or 0.0},
                capability={r: q.capability} if q.capability is not None and math.isfinite(q.capability) else {},
                allocated={r: float(allocated[name])},
                pending={r: float(pending[name])},
                reclaimable=self.reclaimable[name],
            )
            for name, q in self.quota.items()
        ]

    def cycle(self, t: pd.Timestamp, out: ReplayResult) -> None:
        self.history.observe(t, self.sched.allocated, self.sched.pending)
        if (t - self.start) % WEEK == pd.Timedelta(0):
            began = time.perf_counter()
            self.forecaster.retrain(self.history.until(t - HOUR))
            out.retrain_s.append(time.perf_counter() - began)
        self._plan(t, out)
        out.cycles += 1

    def react(self, t: pd.Timestamp, out: ReplayResult) -> None:
        """Between hourly cycles: re-plan from the same forecast (no retrain, no new history sample) when
        a queue has waited long enough beyond its deserved (``PendingWatch``)."""
        if self.watch.observe(self.states(), t.timestamp()):
            self._plan(t, out)
            out.react_cycles += 1

    def _plan(self, t: pd.Timestamp, out: ReplayResult) -> None:
        try:
            forecast = self.forecaster.forecast(self.history.until(t), now=t, horizon=self.horizon)
        except ModelError:  # the loop holds every queue when no usable model forecasts ("missing_model")
            out.held_cycles += 1
            return
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
        changed: dict[str, Quota] = {}
        for name, new in self.quotas_of(plan).items():
            if new != self.quota[name]:
                self.quota[name] = changed[name] = new
                self.last_changed[name] = t.timestamp()
        if changed:  # the whole cycle's plan reaches one session (Scheduler.set_quotas says why)
            self.sched.set_quotas(changed)
            out.quota_changes += len(changed)

    def quotas_of(self, plan: QueuePlan) -> dict[str, Quota]:
        """Each planned queue's quota in the simulator's terms (no capability: unbounded). A queue the plan
        holds comes back with its live values. ``bench.experiments.replay_anchor`` overrides this to replay
        plans the product does not make."""
        r = self.resource
        return {
            name: Quota(
                deserved=state.deserved.get(r, 0.0),
                capability=state.capability.get(r, math.inf),
                guarantee=state.guarantee.get(r, 0.0),
            )
            for name, state in plan.desired.items()
        }
