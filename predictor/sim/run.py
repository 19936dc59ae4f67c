"""One simulation run end to end: jobs → scheduler (with quota policy and scheduler faults) → job faults
→ occupancy → metric families → OpenMetrics / Parquet / tables.

``simulate`` is the function the CLI, the demo, the tests and what-if runs call; the quota policy hook
(``quota_policy``) is called on a fixed interval with the live scheduler, which is how a closed-loop
replay lets the planner set queue quotas hour by hour.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from predictor.errors import InputError
from predictor.sim.cluster import ClusterSpec, QueueSpec, Quota, QuotaChange, default_queues
from predictor.sim.dcgm import DcgmGenerator
from predictor.sim.faults import FaultPlan, faults_frame, plan_job_faults, plan_scheduler_faults
from predictor.sim.kube import kube_families, volcano_families
from predictor.sim.node import node_families
from predictor.sim.occupancy import Occupancy, build_occupancy
from predictor.sim.onsets import draw_onsets
from predictor.sim.openmetrics import write_openmetrics
from predictor.sim.parquet import write_parquet
from predictor.sim.profiles import UsageProfiles, draw_profiles
from predictor.sim.scheduler import Scheduler, SchedulerResult
from predictor.sim.series import Family, StepGrid
from predictor.sim.summary import queue_summary, summarise
from predictor.sources.files import write_frame

__all__ = ["METRIC_SETS", "QuotaPolicy", "SimResult", "SimSettings", "simulate"]

METRIC_SETS: dict[str, tuple[str, ...]] = {
    "all": ("*",),
    "core": (
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_XID_ERRORS",
        "volcano_*",
        "kube_*",
        "node_*",
    ),
}

# A policy gets the time and the live scheduler and returns {queue: (deserved, capability)} to apply.
QuotaPolicy = Callable[[pd.Timestamp, Scheduler], Mapping[str, tuple[float | None, float | None]] | None]
Progress = Callable[[str, float], None]


class SimSettings(BaseModel):
    """Everything that defines a run besides the job table and queues (deterministic for a seed)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    start: pd.Timestamp | None = Field(
        None, description="First sample time (UTC); default: the midnight after the first job."
    )
    weeks: float = Field(1.0, gt=0, le=60, description="Length of the emitted history in weeks.")
    step_s: int = Field(60, ge=1, le=86400, description="Sample step of every series, seconds.")
    seed: int = Field(0, ge=0, description="Seed of every random draw.")
    fault_rate_per_day: float = Field(0.0, ge=0, le=1000, description="Injected faults per day, cluster-wide.")
    warmup_days: float = Field(3.0, ge=0, le=60, description="Jobs replayed before start so the cluster is busy.")
    scheduling_period_s: int = Field(10, ge=1, le=3600, description="Volcano session period (batched events).")
    policy_interval_s: int = Field(3600, ge=60, description="How often a quota policy is consulted.")
    metrics: str = Field("all", description="Metric families: a preset (all, core) or comma-separated globs.")
    fault_onsets: bool = Field(
        False,
        description="Faults whose symptom is a level also ramp up or come in bursts, at 35-100 % amplitude "
        "(default: every fault a step at full strength).",
    )


@dataclass
class SimResult:
    """A finished run: tables in memory, metric families generated lazily by the writers."""

    settings: SimSettings
    grid: StepGrid
    cluster: ClusterSpec
    schedule: SchedulerResult
    occupancy: Occupancy
    profiles: UsageProfiles
    unstarted: pd.DataFrame
    faults: pd.DataFrame
    summary: pd.DataFrame
    queues: list[QueueSpec] = field(default_factory=list)

    @property
    def jobs_out(self) -> pd.DataFrame:
        """One row per attempt: queue, GPUs, submit/start/end, wait, node placement."""
        return self.schedule.attempts.drop(columns=["job_index"])

    def families(self, metrics: str | None = None) -> list[Family]:
        gen = DcgmGenerator(self.occupancy)
        every = [
            *gen.families(),
            *node_families(gen),
            *volcano_families(self.schedule, self.occupancy),
            *kube_families(self.schedule, self.occupancy, self.unstarted),
        ]
        return select_families(every, metrics or self.settings.metrics)

    def write(
        self, out: Path, *, openmetrics: bool = False, parquet: bool = True, progress: Progress | None = None
    ) -> dict[str, int]:
        """Write the tables and the chosen metric outputs under ``out``; returns samples per output."""
        out.mkdir(parents=True, exist_ok=True)
        write_frame(self.jobs_out, out / "jobs_out.parquet")
        write_frame(self.faults, out / "faults.parquet")
        write_frame(self.faults, out / "faults.csv")
        write_frame(self.summary, out / "summary.parquet")
        write_frame(queue_summary(self.schedule, self.occupancy), out / "queues.parquet")
        write_frame(self.profiles.as_frame(self.schedule_jobs), out / "profiles.parquet")
        counts: dict[str, int] = {}
        families = self.families()
        if parquet:
            counts["parquet"] = write_parquet(out / "metrics", _tracked(families, "parquet", progress), self.grid)
        if openmetrics:
            counts["openmetrics"] = write_openmetrics(
                out / "metrics.om", _tracked(families, "openmetrics", progress), self.grid
            )
        return counts

    @property
    def schedule_jobs(self) -> pd.DataFrame:
        return self.occupancy.jobs


def _tracked(families: list[Family], stage: str, progress: Progress | None) -> list[Family]:
    if progress is None:
        return families
    out = []
    for i, family in enumerate(families):

        def series(family: Family = family, i: int = i):  # type: ignore[no-untyped-def]
            progress(f"{stage}: {family.name}", i / len(families))
            yield from family.series()
            progress(f"{stage}: {family.name}", (i + 1) / len(families))

        out.append(Family(family.name, family.kind, family.help, series, family.decimals))
    return out


def select_families(families: Sequence[Family], metrics: str) -> list[Family]:
    patterns = METRIC_SETS.get(metrics) or tuple(p.strip() for p in metrics.split(",") if p.strip())
    chosen = [f for f in families if any(fnmatch.fnmatchcase(f.name, p) for p in patterns)]
    if not chosen:
        raise InputError(f"--metrics {metrics!r} selects no metric family (presets: {', '.join(METRIC_SETS)})")
    return chosen


def simulate(
    jobs: pd.DataFrame,
    cluster: ClusterSpec,
    settings: SimSettings,
    *,
    queues: Sequence[QueueSpec] | None = None,
    quota_changes: Sequence[QuotaChange] = (),
    quota_policy: QuotaPolicy | None = None,
    progress: Progress | None = None,
) -> SimResult:
    """Replay ``jobs`` (a normalised job table) on ``cluster`` and generate the run's history."""
    start = settings.start
    if start is None:
        start = jobs["submit"].min().ceil("D")
    start = pd.Timestamp(start).tz_localize("UTC") if pd.Timestamp(start).tzinfo is None else pd.Timestamp(start)
    start = start.tz_convert("UTC").floor(f"{settings.step_s}s")
    end = start + pd.Timedelta(weeks=settings.weeks)
    grid = StepGrid.between(start, end, pd.Timedelta(seconds=settings.step_s))
    replay_from = start - pd.Timedelta(days=settings.warmup_days)
    window = jobs[(jobs["submit"] >= replay_from) & (jobs["submit"] < end)]
    if window.empty:
        raise InputError(
            f"no job is submitted between {replay_from.isoformat()} and {end.isoformat()} "
            f"(the table spans {jobs['submit'].min().isoformat()} to {jobs['submit'].max().isoformat()})"
        )
    queue_specs = list(queues) if queues else default_queues(window, cluster.n_gpus)
    sched = Scheduler(window, cluster, queue_specs, start=replay_from, period_s=settings.scheduling_period_s)
    sched_faults, job_causes = plan_scheduler_faults(
        settings.fault_rate_per_day, grid, cluster.n_nodes, sorted(sched.jobs["queue"].unique()), settings.seed
    )
    if settings.fault_onsets:
        draw_onsets(sched_faults, settings.seed, stream=0)
    _run_schedule(sched, grid, quota_changes, quota_policy, sched_faults, settings, progress)
    result = sched.result()
    profiles = draw_profiles(sched.jobs, cluster.gpus_per_node, settings.seed)
    job_faults = plan_job_faults(
        job_causes,
        result.attempts,
        result.attempt_gpus,
        profiles.gpus_used,
        grid,
        cluster.gpus_per_node,
        settings.seed,
        first_id=len(sched_faults),
        earlier=sched_faults,
    )
    plans: list[FaultPlan] = sched_faults + job_faults
    if settings.fault_onsets:
        draw_onsets(job_faults, settings.seed, stream=1)
    occ = build_occupancy(
        grid, cluster, result.attempts, result.attempt_gpus, sched.jobs, profiles, plans, settings.seed
    )
    if progress:
        progress("summary", 1.0)
    return SimResult(
        settings=settings,
        grid=grid,
        cluster=cluster,
        schedule=result,
        occupancy=occ,
        profiles=profiles,
        unstarted=sched.unstarted(),
        faults=faults_frame(sorted(plans, key=lambda p: p.start_s), cluster.node_names(), cluster.gpus_per_node),
        summary=summarise(result, occ),
        queues=queue_specs,
    )


def _run_schedule(
    sched: Scheduler,
    grid: StepGrid,
    quota_changes: Sequence[QuotaChange],
    quota_policy: QuotaPolicy | None,
    faults: list[FaultPlan],
    settings: SimSettings,
    progress: Progress | None,
) -> None:
    actions: list[tuple[int, int, Callable[[], None]]] = []
    for i, change in enumerate(quota_changes):
        t = int(change.time.timestamp())
        actions.append((t, i, partial(sched.set_quota, change.queue, change.deserved, change.capability)))
    saved: dict[int, tuple[float, float]] = {}
    for f in faults:
        if f.cause == "node_not_ready":
            actions.append((f.start_s, 0, partial(sched.set_node_ready, f.node, False)))
            actions.append((f.end_s, 0, partial(sched.set_node_ready, f.node, True)))
        elif f.cause == "scheduling_starvation":

            def cut(f: FaultPlan = f) -> None:
                qi = sched.queue_names.index(f.queue)
                saved[f.fault_id] = (float(sched.deserved[qi]), float(sched.capability[qi]))
                # to zero, or (a partial cut, ``SimSettings.fault_onsets``) to a share of what the queue holds
                held = sched.allocated.get(f.queue, 0)
                left = float(np.floor((1.0 - f.amplitude) * held))
                sched.set_quota(f.queue, min(left, float(sched.deserved[qi])), left)
                if left > 0:
                    f.detail = f"queue capability cut to {left:g} of the {held} GPUs it held"

            def restore(f: FaultPlan = f) -> None:
                deserved, capability = saved[f.fault_id]
                sched.set_quota(f.queue, capability=capability)
                sched.set_quota(f.queue, deserved=deserved)

            actions.append((f.start_s, 1, cut))
            actions.append((f.end_s, 2, restore))
    if quota_policy is not None:
        for t in range(grid.start_s, grid.end_s, settings.policy_interval_s):

            def tick(t: int = t) -> None:
                plan = quota_policy(pd.Timestamp(t, unit="s", tz="UTC"), sched) or {}
                if plan:  # one session for the whole plan (Scheduler.set_quotas says why)
                    sched.set_quotas({queue: Quota(*quota) for queue, quota in plan.items()})

            actions.append((t, 3, tick))
    actions.sort(key=lambda a: (a[0], a[1]))
    span = grid.end_s - sched.now
    origin = sched.now
    for t, _, action in actions:
        if t >= grid.end_s:
            continue
        sched.run_until(max(t, sched.now))
        action()
        if progress:
            progress("schedule", (sched.now - origin) / span)
    sched.run_until(grid.end_s)
    if progress:
        progress("schedule", 1.0)
