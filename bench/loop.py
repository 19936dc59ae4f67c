"""Benchmark the scheduling loop: a 1,000-queue planning cycle, and 4-week Philly replays in the simulator.

Usage, from the repository root:
    python -m bench.loop [--jobs PATH] [--weeks 4] [--nodes 96] [--cycle-only] [--queues 1000]
    python -m bench.loop --served [--queues 1000] [--history-weeks 5] [--cycles 5] [--refits 1]

``--served``: one whole loop cycle serving a registered ``auto`` champion (LSTM included) from a local
MLflow registry, against the same cycle refitting the champion (``bench.loop_serve`` says how).

1. Cycle timing: one planning cycle (targets from a forecast frame, the safety policy, the invariant check,
   the patch rendering) for 1,000 queues with a hierarchy, median of several runs.
2. Replays of the Philly jobs (``../shared/data/philly/jobs.csv`` if present, else the bundled one-week
   sample) through ``predictor.sim``: the week before the replay is history, and the static quotas are the
   deserved shares of that week's GPU-time. The real ``Loop`` (plan mode, audit log, plan files) runs
   hourly against the simulated queues; the forecaster is ``auto`` (backtest selection among naive, drift
   and seasonal-naive-24) retrained weekly on the history before each week, its chosen models refitted on
   the newest history each hour. Runs: static elastic (capability = cluster), static hard
   (capability = deserved), shadow (the loop plans against the static-hard run but nothing is applied:
   plan counts, reasons and quota that would have moved) and closed loop (the loop's plans set the
   simulated quotas). Every invariant is checked at every step.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.loop_serve import bench_served
from bench.loop_sim import GPU, SIMULATED, SimCluster, SimHistory, WeeklyAuto, hourly_demand, week1_queues
from predictor import sim
from predictor.config import load_settings
from predictor.loop import Loop
from predictor.planner import (
    PlannerSettings,
    QueueState,
    check_invariants,
    forecast_targets,
    merge_patch,
    plan_queues,
    queues_from_list,
)

REPO = Path(__file__).resolve().parents[1]
DEFAULT_JOBS = REPO.parent / "shared" / "data" / "philly" / "jobs.csv"
HOUR = pd.Timedelta(hours=1)


# ---------------------------------------------------------------------------------------------- cycle timing
def bench_cycle(n: int, repeats: int = 7) -> None:
    rng = np.random.default_rng(0)
    now = pd.Timestamp("2026-11-02T00:00:00Z")
    queues = [QueueState(name=f"team-{i // 10}", deserved={GPU: 1e6}, capability={GPU: 1e6}) for i in range(0, n, 10)]
    for i in range(n - len(queues)):
        d = float(rng.integers(0, 64))
        queues.append(
            QueueState(
                name=f"q{i}",
                parent=f"team-{i % len(queues[: n // 10])}",
                deserved={GPU: d},
                capability={GPU: d + float(rng.integers(0, 32))},
                guarantee={GPU: d // 2},
                allocated={GPU: float(rng.integers(0, int(d) + 1))},
            )
        )
    times = pd.date_range(now, periods=25, freq="h")
    level = rng.gamma(2.0, 12.0, size=len(queues))
    frame = pd.DataFrame(
        {"series_id": np.repeat([q.name for q in queues], len(times)), "timestamp": np.tile(times, len(queues))}
    )
    mean = np.repeat(level, len(times)) + rng.normal(0, 2, len(frame))
    for col, k in (("mean", 0), ("lo-80", -1.3), ("hi-80", 1.3), ("lo-95", -2), ("hi-95", 2)):
        frame[col] = np.maximum(mean + k * 3, 0)
    policy = PlannerSettings()  # type: ignore[call-arg]
    samples, plan = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        targets = forecast_targets(frame, policy, now=now)
        plan = plan_queues(queues, targets, policy, now=now, allocatable={GPU: 64000.0})
        problems = check_invariants(queues, dict(plan.desired), {GPU: 64000.0})
        for name in plan.changed_queues():
            merge_patch(plan.desired[name], [GPU], resource_version="1")
        samples.append(time.perf_counter() - t0)
        assert problems == [], problems[:3]
    assert plan is not None
    print(f"\n## One planning cycle, {len(queues):,} queues ({n // 10} parents), median of {repeats}\n")
    print("| queues | changes | held | median s | min s | max s |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {len(queues):,} | {len(plan.changes):,} | {len(plan.held):,} | {statistics.median(samples):.3f} "
        f"| {min(samples):.3f} | {max(samples):.3f} |"
    )


# ---------------------------------------------------------------------------------------------- replays
class Replay:
    """The quota policy handed to ``sim.simulate``: one real ``Loop`` cycle per simulated hour."""

    def __init__(
        self,
        jobs: pd.DataFrame,
        start: pd.Timestamp,
        specs: list[sim.QueueSpec],
        total: int,
        workdir: Path,
        *,
        closed: bool,
    ) -> None:
        self.start, self.total, self.closed = start, total, closed
        self.cluster = SimCluster(specs, total)
        self.static = {s.name: (s.deserved, s.capability) for s in specs}
        self.history = SimHistory(hourly_demand(jobs, start - pd.Timedelta(days=7), start))
        self.forecaster = WeeklyAuto()
        settings = load_settings(
            None,
            actuators={**SIMULATED, "audit_log": workdir / "audit.jsonl", "plan_dir": workdir / "plans"},
            loop={"interval_s": 3600.0},
        )
        self.now = start
        self.loop = Loop(
            settings, cluster=self.cluster, history=self.history, forecaster=self.forecaster, clock=lambda: self.now
        )
        self.changes: Counter[str] = Counter()
        self.held: Counter[str] = Counter()
        self.cycles = self.held_cycles = self.violations = 0
        self.moved = 0.0  # Σ |Δ| of deserved and capability over every planned change, GPUs
        self.gap: list[float] = []  # per hour: Σ_q |deserved − static deserved|
        self.seconds: list[float] = []

    def __call__(self, t: pd.Timestamp, sched: Any) -> dict[str, tuple[float | None, float | None]] | None:
        self.cluster.sched, self.now = sched, t
        self.history.observe(t, sched)
        week = int((t - self.start) / pd.Timedelta(days=7))
        if (t - self.start) % pd.Timedelta(days=7) == pd.Timedelta(0):
            self.forecaster.retrain(self.history.history(t - HOUR), f"auto-week{week + 1}")
        live = queues_from_list(self.cluster.queue_objects())
        t0 = time.perf_counter()
        report = self.loop.run_once()
        self.seconds.append(time.perf_counter() - t0)
        plan = report.plan
        assert plan is not None
        self.cycles += 1
        self.held_cycles += report.hold is not None
        self.violations += len(check_invariants(live, dict(plan.desired), {GPU: float(self.total)}))
        for c in plan.changes:
            self.changes[f"{c.field}:{c.code}"] += 1
            if c.field in ("deserved", "capability") and c.before is not None and math.isfinite(c.before):
                self.moved += abs(c.after - c.before)
        for h in plan.held:
            self.held[h.code] += 1
        changed = self.cluster.take(dict(plan.desired))
        self.gap.append(sum(abs(q[1] - self.static[n][0]) for n, q in self.cluster.quota.items()))
        return changed if self.closed else None


def run_sim(
    jobs: pd.DataFrame,
    cluster: sim.ClusterSpec,
    start: pd.Timestamp,
    weeks: float,
    specs: list[sim.QueueSpec],
    policy: Any = None,
) -> sim.SimResult:
    settings = sim.SimSettings(start=start, weeks=weeks, step_s=600, warmup_days=7, metrics="core")
    return sim.simulate(jobs, cluster, settings, queues=specs, quota_policy=policy)


def replayed(result: sim.SimResult) -> pd.DataFrame:
    """Attempts of jobs submitted inside the replay window (the warm-up week is the same for every run)."""
    a = result.schedule.attempts
    return a[a["submit"] >= result.grid.index()[0]]


def per_queue(result: sim.SimResult) -> pd.DataFrame:
    s = result.schedule
    span = np.diff(np.append(s.timeline_s, s.timeline_s[-1]))
    window = s.timeline_s >= result.grid.start_s
    alloc = (s.allocated[window] * span[window, None]).sum(axis=0) / max(span[window].sum(), 1)
    a = replayed(result)
    waits = a.groupby("queue")["wait_s"]
    return pd.DataFrame(
        {
            "mean_alloc": pd.Series(alloc, index=s.queue_names),
            "jobs": waits.size(),
            "mean_wait_min": waits.mean() / 60,
            "p95_wait_min": waits.quantile(0.95) / 60,
            "preemptions": a.groupby("queue")["killed"].sum(),
        }
    ).fillna(0)


def totals(result: sim.SimResult) -> dict[str, float]:
    t = sim.summary_totals(result.summary, result.schedule.attempts)
    waits = replayed(result)["wait_s"].to_numpy()
    return {
        "alloc %": 100 * t["mean_allocation_rate"],
        "FGD frag %": 100 * t["mean_fragmentation_rate"],
        "mean wait min": float(waits.mean()) / 60,
        "p95 wait min": float(np.percentile(waits, 95)) / 60,
        "mean pending GPUs": t["mean_pending_gpus"],
        "preemptions": int(replayed(result)["killed"].sum()),
        "jobs started": len(waits),
    }


def print_replay(name: str, replay: Replay) -> None:
    print(f"\n## {name}: {replay.cycles} hourly cycles, invariant violations: {replay.violations}\n")
    print(
        f"cycles holding everything: {replay.held_cycles}; forecaster retrained {replay.forecaster.retrains}x; "
        f"loop cycle median {statistics.median(replay.seconds):.3f} s (forecast refit included)"
    )
    print(
        f"quota moved by planned changes: {replay.moved:,.0f} GPUs (deserved + capability); mean "
        f"Σ|deserved − static| = {statistics.mean(replay.gap):,.1f} GPUs per hour\n"
    )
    print("| planned change (field:reason) | count |\n|---|---:|")
    for key, n in replay.changes.most_common():
        print(f"| {key} | {n:,} |")
    print("\n| held (reason) | count |\n|---|---:|")
    for key, n in replay.held.most_common():
        print(f"| {key} | {n:,} |")


def replays(jobs_path: Path, weeks: float, nodes: int) -> None:
    from predictor.sim.jobs import load_jobs

    jobs = load_jobs(jobs_path) if jobs_path.is_file() else sim.philly_sample()
    source = str(jobs_path) if jobs_path.is_file() else "bundled Philly sample"
    first = jobs["submit"].min().tz_convert("UTC").floor("D")
    start = first + pd.Timedelta(days=7) if not jobs_path.is_file() else pd.Timestamp("2017-10-09T00:00Z")
    weeks = min(weeks, (jobs["submit"].max() - start) / pd.Timedelta(days=7))
    cluster = sim.ClusterSpec.uniform(nodes)
    total = cluster.n_gpus
    print(f"\n# Replay: {source}, {weeks:g} weeks from {start.date()}, {total} GPUs ({nodes} × 8)")
    results: dict[str, sim.SimResult] = {}
    t0 = time.perf_counter()
    results["static elastic"] = run_sim(jobs, cluster, start, weeks, week1_queues(jobs, start, total, hard=False))
    results["static hard"] = run_sim(jobs, cluster, start, weeks, week1_queues(jobs, start, total, hard=True))
    with tempfile.TemporaryDirectory() as tmp:
        shadow = Replay(jobs, start, week1_queues(jobs, start, total, hard=True), total, Path(tmp) / "s", closed=False)
        run_sim(jobs, cluster, start, weeks, week1_queues(jobs, start, total, hard=True), shadow)
        closed = Replay(jobs, start, week1_queues(jobs, start, total, hard=True), total, Path(tmp) / "c", closed=True)
        results["loop (closed)"] = run_sim(
            jobs, cluster, start, weeks, week1_queues(jobs, start, total, hard=True), closed
        )
    print(f"(four simulations in {time.perf_counter() - t0:.0f} s)")
    print_replay("Plan mode against the static-hard run (shadow, nothing applied)", shadow)
    print_replay("Closed loop (plans set the simulated quotas)", closed)
    print("\n## Side by side (totals over the replay)\n")
    print("| run | " + " | ".join(totals(results["static hard"])) + " |")
    print("|---|" + "---:|" * len(totals(results["static hard"])))
    for name, r in results.items():
        print(
            f"| {name} | "
            + " | ".join(f"{v:,.1f}" if isinstance(v, float) else f"{v:,}" for v in totals(r).values())
            + " |"
        )
    print("\n## Per queue: mean allocated GPUs / mean wait min / p95 wait min / preemptions\n")
    frames = {name: per_queue(r) for name, r in results.items()}
    rows = []
    for queue in frames["static hard"].index:
        if frames["static elastic"].loc[queue, "jobs"] == 0:
            continue  # queues with no job in the replay window
        row: dict[str, Any] = {"queue": queue, "jobs": int(frames["static elastic"].loc[queue, "jobs"])}
        for name, f in frames.items():
            v = f.loc[queue] if queue in f.index else None
            row[name] = (
                "-"
                if v is None
                else (
                    f"{v['mean_alloc']:.0f} / {v['mean_wait_min']:.0f} / "
                    f"{v['p95_wait_min']:.0f} / {int(v['preemptions'])}"
                )
            )
        rows.append(row)
    print(markdown(pd.DataFrame(rows), index=False))


def markdown(frame: pd.DataFrame, *, index: bool = True, digits: int = 1) -> str:
    """A Markdown table (pandas' ``to_markdown`` needs tabulate, which the project does not depend on)."""
    data = frame.reset_index() if index else frame
    cells = [[f"{v:,.{digits}f}" if isinstance(v, float) else str(v) for v in row] for row in data.to_numpy()]
    head = [str(c) if str(c) != "index" else "" for c in data.columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in cells])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=Path, default=DEFAULT_JOBS, help="Philly jobs.csv (default: shared data)")
    parser.add_argument("--weeks", type=float, default=4.0)
    parser.add_argument("--nodes", type=int, default=96)
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--cycle-only", action="store_true", help="Only the 1,000-queue cycle timing.")
    parser.add_argument("--served", action="store_true", help="Only the served-champion cycle against refitting.")
    parser.add_argument("--history-weeks", type=float, default=5.0, help="--served: weeks of hourly history")
    parser.add_argument("--cycles", type=int, default=5, help="--served: timed served cycles")
    parser.add_argument("--refits", type=int, default=1, help="--served: timed refit cycles (slow)")
    args = parser.parse_args(argv)
    if args.served:
        bench_served(args.queues, args.history_weeks, args.cycles, args.refits)
        return 0
    bench_cycle(args.queues)
    if not args.cycle_only:
        replays(args.jobs, args.weeks, args.nodes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
