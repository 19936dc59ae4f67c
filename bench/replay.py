"""Benchmark the quota policies in replay: 4 Philly weeks and the Alibaba DLRM jobs, five policies each.

Usage, from the repository root:
    python -m bench.replay [--weeks 4] [--sizing drain|mean] [--load 0.95]
        [--datasets philly,alibaba[,synthetic]] [--policies static-hard,...] [--seed 0]
        [--borrow idle|forecast] [--objective] [--wait-gpu-h W] [--reclaim-gpu-h R]
        [--deserved-below-allocated] [--guarantee-within-demand]
        [--pending-raise] [--react-pending-gpus N] [--react-after-min M] [--tail-quantiles 0.8,0.9,0.95]

Cluster size ("demand close to capacity"), one rule for every trace (``--sizing``):

- ``drain`` (the default): the smallest cluster on which a work-conserving, quota-free scheduler with fluid
  GPUs ends the replay with no backlog (under one GPU-hour). Smaller, and some submitted work must stay undone
  however it is scheduled; so demand is as close to capacity as it can be while the work still fits.
  Parameter-free, and never below the ``mean`` rule's size.
- ``mean`` (the earlier rule): mean zero-wait demand over the replay at ``--load`` of capacity. On a trace
  whose demand grows it over-subscribes the end: the fluid backlog grows to the last hour, part of the jobs
  never start, and p95 wait measures which cohort starves rather than a policy at "demand close to capacity".

Each trace prints both rules' node counts and, week by week, zero-wait demand ÷ capacity (mean, p95) and
the fluid backlog at the week's end. Replays run with Volcano's reclaim and preempt actions on, jobs
checkpointing hourly and paying 5 minutes to restart (``predictor.replay`` defaults). Printed: one table per
trace with every policy's ``summary.json`` measures and its wall time, then the goals, each checked against
the numbers above it (a goal that is missed says so): the loop beats static-elastic on goodput, loses at
least 30 % fewer GPU-hours to reclaims and has no worse p95 wait; ``rightsize+loop`` allocates at least 89 %
where demand allows and keeps fragmentation at most 5 %. "Where demand allows" is computed per trace, on the
same jobs and cluster: the work-conserving fluid bound (zero-wait demand with the backlog carried hour to
hour, no gangs: no scheduler allocates more of the jobs' own GPU-time) and a quota-free run (all jobs in one
queue owning the cluster, same gangs, nodes and scheduler). The allocation goal is ≥ min(89 %, fluid bound).

- Philly (``../shared/data/philly/jobs.csv``, CC BY 4.0): 4 weeks from 2017-10-09; no workload ids, so
  nothing recurs and ``rightsize+loop`` equals ``loop`` there.
- Alibaba (``../shared/data/alibaba/jobs.csv``, cluster-trace-gpu-v2025 DLRM GPU instances, research use):
  queues are the 10 largest apps plus ``other``; an app is a recurring workload; instances alive at the
  end of the trace run until it (right-censored). No calendar in the trace: day 0 is mapped to 2026-01-05.
- Synthetic (``--datasets synthetic``, not in the default run): the simulator's jobs recurring as 4 workload
  templates per queue, the dataset where right-sizing has recurring workloads to act on.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from predictor.planner import PlannerSettings
from predictor.replay import POLICIES, ReplaySettings, replay
from predictor.replay.demand import zero_wait_demand
from predictor.sim import load_jobs, normalise_jobs

REPO = Path(__file__).resolve().parents[1]

DATA = REPO.parent / "shared" / "data"
COLUMNS = (
    "allocation",
    "utilisation",
    "wait_p50_min",
    "wait_p95_min",
    "preemptions",
    "reclaims",
    "lost_gpu_h",
    "goodput_gpu_h",
    "fragmentation",
)


def philly() -> tuple[pd.DataFrame, pd.Timestamp]:
    return load_jobs(DATA / "philly" / "jobs.csv"), pd.Timestamp("2017-10-09T00:00Z")


def alibaba() -> tuple[pd.DataFrame, pd.Timestamp]:
    raw = pd.read_csv(DATA / "alibaba" / "jobs.csv")
    gpu = raw[(raw["source"] == "dlrm2025") & (raw["req_gpus"] > 0) & raw["submit_time_s"].notna()].copy()
    trace_end = float(gpu[["submit_time_s", "end_time_s"]].max().max())
    duration = gpu["duration_s"].where(gpu["duration_s"] > 0)
    duration = duration.fillna(trace_end - gpu["submit_time_s"]).clip(lower=60)
    top = gpu["group"].value_counts().index[:10]
    queue = gpu["group"].where(gpu["group"].isin(top), "other").str.replace("_", "-")
    day0 = pd.Timestamp("2026-01-05T00:00Z")
    frame = pd.DataFrame(
        {
            "job_id": gpu["job_id"].astype(str),
            "submit_time": (day0 + pd.to_timedelta(gpu["submit_time_s"], unit="s")),
            "queue": queue,
            "num_gpus": np.ceil(gpu["req_gpus"]).astype(int),
            "duration_s": duration,
            "workload": gpu["group"].astype(str),
        }
    )
    jobs = normalise_jobs(frame, source="alibaba dlrm2025")
    return jobs, (jobs["submit"].min().floor("D") + pd.Timedelta(days=7))


def synthetic() -> tuple[pd.DataFrame, pd.Timestamp]:
    """The simulator's recurring-workload jobs (``predictor simulate --synthetic --workloads-per-queue 4``):
    the "where demand allows" dataset for right-sizing, since neither public trace names recurring jobs
    honestly (Philly's job file has no user or job name; Alibaba's apps are not one job run again)."""
    from predictor.sim import synthetic_jobs

    begin = pd.Timestamp("2026-01-05T00:00Z")
    jobs = synthetic_jobs(
        begin - pd.Timedelta(days=7), begin + pd.Timedelta(weeks=4), seed=0, jobs_per_hour=60, workloads_per_queue=4
    )
    return jobs, begin


def hourly_demand(jobs: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> pd.Series:
    """Cluster zero-wait demand per hour from the warm-up week to ``end``, of the jobs a replay schedules."""
    warm = start - pd.Timedelta(days=7)
    window = jobs[(jobs["submit"] >= warm) & (jobs["submit"] < end)]
    return zero_wait_demand(window, warm, end).groupby("timestamp")["value"].sum()


def fluid(demand: pd.Series, capacity: int) -> tuple[pd.Series, pd.Series]:
    """A work-conserving, quota-free scheduler with fluid GPUs (no gangs, no nodes), hour by hour: it serves
    ``min(capacity, zero-wait demand + backlog)`` and carries the rest as backlog (GPU-hours). Returns the
    served GPUs and the backlog after each hour. The backlog at any hour only falls as capacity grows."""
    backlog, served, left = 0.0, [], []
    for value in demand.to_numpy(float).tolist():
        serve = min(float(capacity), value + backlog)
        backlog = max(0.0, backlog + value - serve)
        served.append(serve)
        left.append(backlog)
    return pd.Series(served, index=demand.index), pd.Series(left, index=demand.index)


def sized_nodes(
    jobs: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp, load: float, per_node: int, sizing: str = "drain"
) -> int:
    """Nodes for the replay under a sizing rule.

    ``mean`` (the earlier rule): the mean zero-wait demand over ``[start, end)`` is ``load`` of capacity. On a
    trace whose demand grows (Alibaba DLRM) that leaves the last weeks over-subscribed and the backlog growing
    to the end, so p95 wait measures which cohort never starts. ``drain`` (the default): the smallest cluster
    on which the work-conserving fluid scheduler (``fluid``) ends the replay with less than one GPU-hour of
    backlog: the work submitted fits, and any smaller cluster must leave work undone however it schedules.
    Parameter-free (``load`` does not apply); never below the ``mean`` rule's size."""
    demand = zero_wait_demand(jobs, start, end).groupby("timestamp")["value"].sum()
    mean_rule = max(1, round(float(demand.mean()) / (load * per_node)))
    if sizing == "mean":
        return mean_rule
    if sizing != "drain":
        raise ValueError(f"sizing: {sizing!r} is not one of mean, drain")
    full = hourly_demand(jobs, start, end)
    low, high = mean_rule, max(mean_rule, math.ceil(float(full.max()) / per_node))
    while low < high:  # the backlog is monotone in capacity: bisect on nodes
        mid = (low + high) // 2
        if float(fluid(full, mid * per_node)[1].iloc[-1]) < 1.0:
            high = mid
        else:
            low = mid + 1
    return low


def fluid_bound(jobs: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp, capacity: int) -> float:
    """The allocation a work-conserving, quota-free scheduler reaches if GPUs were fluid (no gangs, no nodes).

    Hour by hour from the warm-up week (``fluid``), so a burst above capacity fills later idle hours (the
    hourly ``min(demand, capacity)`` does not, and understates what a queueing scheduler can allocate). No
    scheduler allocates more of the jobs' own GPU-time: an upper bound on "where demand allows" (a replay's
    allocation can exceed it only by work evicted jobs run again and their restart overhead)."""
    served = fluid(hourly_demand(jobs, start, end), capacity)[0]
    served = served[served.index >= start]
    return float(served.mean()) / capacity if len(served) else 0.0


def profile(jobs: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp, capacity: int) -> None:
    """Week by week: zero-wait demand ÷ capacity (mean, p95) and the fluid backlog at the week's end."""
    full = hourly_demand(jobs, start, end)
    backlog = fluid(full, capacity)[1]
    inside = full.index >= start
    week = np.asarray((pd.DatetimeIndex(full.index[inside]) - start) // pd.Timedelta(days=7))
    print("| week | hours | demand mean ÷ capacity | demand p95 ÷ capacity | fluid backlog at week end, GPU-h |")
    print("|---:|---:|---:|---:|---:|")
    for w, d in full[inside].groupby(week):
        left = backlog[inside][week == w]
        print(
            f"| {w} | {len(d)} | {d.mean() / capacity:.0%} | {d.quantile(0.95) / capacity:.0%} | {left.iloc[-1]:,.0f} |"
        )
    print()


def quota_free(jobs: pd.DataFrame, nodes: int, start: pd.Timestamp, weeks: float, seed: int) -> dict[str, float]:
    """The same jobs through the same scheduler as one queue owning the cluster (no quotas, no reclaim): what
    a quota-free scheduler allocates with gangs on whole nodes (binpack, FIFO with a 64-job backfill scan)."""
    one = jobs.assign(queue="all")
    return replay(
        one, ReplaySettings(nodes=nodes, start=start, weeks=weeks, policy="static-elastic", seed=seed)
    ).summary


def run_trace(
    name: str,
    jobs: pd.DataFrame,
    start: pd.Timestamp,
    weeks: float,
    load: float,
    policies: list[str],
    seed: int,
    planner: PlannerSettings | None = None,
    sizing: str = "drain",
    tails: tuple[float, ...] = (),
) -> dict[str, dict[str, float]]:
    weeks = min(weeks, (jobs["submit"].max() - start) / pd.Timedelta(days=7))
    end = start + pd.Timedelta(weeks=weeks)
    rules = {rule: sized_nodes(jobs, start, end, load, 8, rule) for rule in ("mean", "drain")}
    nodes = rules[sizing]
    demand = zero_wait_demand(jobs, start, end).groupby("timestamp")["value"].sum()
    hourly = float(demand.clip(upper=nodes * 8).mean()) / (nodes * 8)
    fluid = fluid_bound(jobs, start, end, nodes * 8)
    free = quota_free(jobs, nodes, start, weeks, seed)
    verdict = (
        "reachable (the quota-free scheduler reaches it)"
        if free["allocation"] >= 0.89
        else "NOT reachable (above the fluid bound)"
        if fluid < 0.89
        else "not shown reachable"
    )
    print(
        f"\n## {name}: {weeks:.2f} weeks from {start.date()}, {nodes} nodes × 8 = {nodes * 8} GPUs; zero-wait "
        f"demand mean {demand.mean():,.0f}, p95 {demand.quantile(0.95):,.0f} GPUs "
        f"({demand.mean() / (nodes * 8):.0%} of capacity)\n"
    )
    print(
        f"Sizing `{sizing}`: {nodes} nodes. The rules on this trace: mean demand at {load:.0%} of capacity "
        f"(`mean`) {rules['mean']} nodes; smallest cluster whose fluid backlog drains by the end (`drain`) "
        f"{rules['drain']} nodes.\n"
    )
    profile(jobs, start, end, nodes * 8)
    print(
        "Allocation where demand allows (computed on the same jobs and cluster): hourly min(zero-wait demand, "
        f"capacity) {hourly:.1%}; work-conserving fluid bound (backlog carried, no gangs) {fluid:.1%}; "
        f"quota-free scheduler (one queue, same gangs and nodes) {free['allocation']:.1%} "
        f"(p95 wait {free['wait_p95_min']:,.0f} min). 89 % is {verdict} on this trace.\n"
    )
    print("| policy | " + " | ".join(COLUMNS) + " | changed requests | quota changes | react cycles | s |")
    print("|---|" + "---:|" * (len(COLUMNS) + 4))
    results: dict[str, dict[str, float]] = {}
    base = planner.model_dump(exclude_unset=True) if planner is not None else {}
    runs = [
        (f"{p} q={q:g}" if tails and p.endswith("loop") else p, {**base, "tail_quantile": q} if tails else base, p)
        for p in policies
        for q in (tails if tails and p.endswith("loop") else (None,))
    ]
    for label, config, policy in runs:
        t0 = time.perf_counter()
        r = replay(
            jobs,
            ReplaySettings(
                nodes=nodes,
                start=start,
                weeks=weeks,
                policy=policy,
                seed=seed,
                planner=PlannerSettings.model_validate(config),
            ),
        )
        seconds = time.perf_counter() - t0
        results[label] = r.summary
        cells = [
            f"{r.summary[c]:.3f}" if c in ("allocation", "utilisation", "fragmentation") else f"{r.summary[c]:,.1f}"
            for c in COLUMNS
        ]
        print(
            f"| {label} | " + " | ".join(cells) + f" | {r.rightsized_jobs:,} | {r.quota_changes:,} | "
            f"{r.react_cycles:,} | {seconds:,.0f} |",
            flush=True,
        )
    goals(results, fluid, free["allocation"])
    return results


def goals(r: dict[str, dict[str, float]], fluid: float, quota_free: float) -> None:
    """The goals the loop and right-sizing are held to, checked on this table."""
    print()
    for label in [k for k in r if k.startswith("loop") and "static-elastic" in r]:
        loop, elastic = r[label], r["static-elastic"]
        tail_goal = 1.1 * elastic["wait_p95_min"] + 10
        meets = (
            loop["wait_p95_min"] <= tail_goal
            and loop["lost_gpu_h"] <= elastic["lost_gpu_h"]
            and loop["goodput_gpu_h"] >= elastic["goodput_gpu_h"]
        )
        print(
            f"- {label}: p95 ≤ 1.1 × static-elastic + 10 min ({tail_goal:,.1f}), reclaim-lost ≤ and goodput ≥ "
            f"static-elastic: {'met' if meets else 'NOT met'}"
        )
        gain = loop["goodput_gpu_h"] - elastic["goodput_gpu_h"]
        less = 1 - loop["lost_gpu_h"] / elastic["lost_gpu_h"] if elastic["lost_gpu_h"] > 0 else math.nan
        print(f"- loop vs static-elastic goodput: {gain:+,.0f} GPU-h ({'beats' if gain > 0 else 'does NOT beat'})")
        print(
            f"- loop reclaim-lost GPU-h vs static-elastic: {less:+.0%} less (goal ≥ 30 %: "
            f"{'met' if less >= 0.3 else 'NOT met'})"
        )
        worse = loop["wait_p95_min"] - elastic["wait_p95_min"]
        print(
            f"- loop p95 wait {loop['wait_p95_min']:,.0f} min vs {elastic['wait_p95_min']:,.0f} "
            f"({'no worse' if worse <= 0 else f'worse by {worse:,.0f} min'})"
        )
    if "rightsize+loop" in r:
        rs = r["rightsize+loop"]
        goal = min(0.89, fluid)  # where demand allows: 89 %, or the most any scheduler can allocate
        print(
            f"- rightsize+loop allocation {rs['allocation']:.1%} (goal ≥ 89 % where demand allows: the fluid "
            f"bound is {fluid:.1%}, so the goal here is ≥ {goal:.1%}: "
            f"{'met' if rs['allocation'] >= goal - 5e-4 else 'NOT met'}; the quota-free scheduler reaches "
            f"{quota_free:.1%}), fragmentation "
            f"{rs['fragmentation']:.1%} "
            f"(goal ≤ 5 %: {'met' if rs['fragmentation'] <= 0.05 else 'NOT met'})"
        )
    if "oracle" in r:
        for policy in ("loop", "rightsize+loop"):
            if policy in r:
                o, p = r["oracle"], r[policy]
                print(
                    f"- gap {policy} → oracle: goodput {o['goodput_gpu_h'] - p['goodput_gpu_h']:+,.0f} GPU-h, "
                    f"allocation {100 * (o['allocation'] - p['allocation']):+.1f} points, p95 wait "
                    f"{o['wait_p95_min'] - p['wait_p95_min']:+,.0f} min, lost "
                    f"{o['lost_gpu_h'] - p['lost_gpu_h']:+,.0f} GPU-h"
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--weeks", type=float, default=4.0)
    parser.add_argument(
        "--load", type=float, default=0.95, help="With --sizing mean: mean demand ÷ capacity the cluster is sized to."
    )
    parser.add_argument(
        "--sizing",
        choices=("drain", "mean"),
        default="drain",
        help="drain: the smallest cluster on which a work-conserving fluid scheduler leaves no "
        "backlog at the end (the default); mean: mean demand at --load of capacity (the earlier rule).",
    )
    parser.add_argument("--datasets", default="philly,alibaba")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--borrow",
        choices=("idle", "forecast"),
        default="idle",
        help="planner.borrow for the planned policies: capability from the forecast, or the "
        "cluster (borrow idle GPUs, reclaimed by Volcano; the default).",
    )
    parser.add_argument(
        "--deserved-below-allocated",
        action="store_true",
        help="planner.deserved_below_allocated: with borrow idle, deserved may be planned below "
        "what a queue holds, so the rest is reclaimable.",
    )
    parser.add_argument(
        "--guarantee-within-demand",
        action="store_true",
        help="planner.guarantee_within_demand: no guarantee above what a queue holds or its pending gangs ask for.",
    )
    parser.add_argument(
        "--pending-raise",
        choices=("off", "target", "lift"),
        default="off",
        help="planner.pending_raise: a deserved raise toward allocated + pending GPUs skips the max "
        "step, dead band and cooldown (cuts keep them); capped by the deserved target (target) or "
        "with the target lifted to it before the fit (lift).",
    )
    parser.add_argument(
        "--react-pending-gpus",
        type=float,
        default=0.0,
        help="planner.react_pending_gpus: re-plan between hourly cycles when a queue has this many "
        "GPUs pending beyond its deserved for --react-after-min (0: hourly only).",
    )
    parser.add_argument(
        "--react-after-min",
        type=float,
        default=10.0,
        help="planner.react_after_s in minutes (with --react-pending-gpus).",
    )
    parser.add_argument(
        "--objective",
        action="store_true",
        help="Plan deserved and guarantee with planner.objective (the newsvendor, default costs).",
    )
    parser.add_argument(
        "--wait-gpu-h",
        type=float,
        default=None,
        help="planner.objective.wait_gpu_h (implies --objective): below idle_gpu_h (1) puts the "
        "guarantee below the demand's median, at the wait/(wait+idle) quantile.",
    )
    parser.add_argument(
        "--reclaim-gpu-h",
        type=float,
        default=None,
        help="planner.objective.reclaim_gpu_h (implies --objective): deserved at the reclaim/(reclaim+idle) quantile.",
    )
    parser.add_argument(
        "--tail-quantiles",
        default="",
        help="planner.tail_quantile values (comma-separated): each planned policy runs once per value.",
    )
    args = parser.parse_args(argv)
    from predictor.planner.objective import Objective

    costs = {k: v for k, v in (("wait_gpu_h", args.wait_gpu_h), ("reclaim_gpu_h", args.reclaim_gpu_h)) if v is not None}
    planner = PlannerSettings.model_validate(
        {
            "borrow": args.borrow,
            "deserved_below_allocated": args.deserved_below_allocated,
            "guarantee_within_demand": args.guarantee_within_demand,
            "pending_raise": args.pending_raise,
            "react_pending_gpus": args.react_pending_gpus,
            "react_after_s": 60 * args.react_after_min,
            "objective": Objective.model_validate(costs) if args.objective or costs else None,
        }
    )
    print(
        f"sizing: {args.sizing}; planner.borrow: {args.borrow}; "
        f"planner.deserved_below_allocated: {planner.deserved_below_allocated}; "
        f"planner.guarantee_within_demand: {planner.guarantee_within_demand}; "
        f"planner.objective: {planner.objective}; planner.pending_raise: {planner.pending_raise}; "
        f"planner.react_pending_gpus: {planner.react_pending_gpus:g}; "
        f"planner.react_after_s: {planner.react_after_s:g}"
    )
    policies = [p for p in args.policies.split(",") if p]
    loaders = {"philly": philly, "alibaba": alibaba, "synthetic": synthetic}
    for name in args.datasets.split(","):
        jobs, start = loaders[name]()
        tails = tuple(float(q) for q in args.tail_quantiles.split(",") if q)
        run_trace(name, jobs, start, args.weeks, args.load, policies, args.seed, planner, args.sizing, tails)
    return 0


if __name__ == "__main__":
    sys.exit(main())
