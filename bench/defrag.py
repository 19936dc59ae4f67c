"""Benchmark: does the defragmentation advice pay? Measured in the simulator on a small fragmented cluster.

A 16-node (128-GPU) cluster runs a stream of 1-, 2- and 4-GPU jobs and, every few hours, a 16-GPU gang
that needs two whole 8-GPU nodes. Every ``--every`` hours the run is paused; where a gang waits although
the cluster has enough free GPUs for it (it is blocked by fragmentation), the state is copied twice:

* **as is**: the copy runs on unchanged;
* **advice**: ``predictor.planner.fragmentation.defrag_advice`` names the nodes to drain; the copy drains
  them (the simulator's node-not-ready eviction: their gangs restart elsewhere, losing their progress),
  puts them back, and runs on.

Both copies run ``--horizon`` hours. The table gives, per paused moment and in total, the waiting gang's
extra wait, FGD before and after, the GPU-hours the restarts lost and the GPU-hours allocated in the
horizon, so the gain is set against the cost in the same units.

    python -m bench.defrag [--days 4] [--every 2] [--horizon 12] [--seed 0]
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from predictor.planner.fragmentation import defrag_advice
from predictor.planner.workload import JobSummary, NodeSummary, Workload
from predictor.sim import ClusterSpec, QueueSpec, Scheduler, normalise_jobs

REPO = Path(__file__).resolve().parents[1]

START = pd.Timestamp("2026-11-02", tz="UTC")
NODES, G = 16, 8


def jobs(days: float, seed: int, rate: float) -> pd.DataFrame:
    """Small jobs (Poisson, ``rate``/h, lognormal ~3 h) and a 16-GPU, ~8 h gang every ~6 h."""
    rng = np.random.default_rng(seed)
    hours = days * 24
    n_small = rng.poisson(rate * hours)
    small = pd.DataFrame(
        {
            "submit": START + pd.to_timedelta(np.sort(rng.uniform(0, hours, n_small)), unit="h"),
            "num_gpus": rng.choice([1, 2, 4], n_small, p=[0.5, 0.25, 0.25]),
            "duration_s": np.exp(rng.normal(np.log(2.5 * 3600), 0.6, n_small)),
        }
    )
    starts = np.arange(3.0, hours, 6.0) + rng.uniform(0, 2, len(np.arange(3.0, hours, 6.0)))
    big = pd.DataFrame(
        {
            "submit": START + pd.to_timedelta(starts, unit="h"),
            "num_gpus": 16,
            "duration_s": rng.uniform(6, 10, len(starts)) * 3600,
        }
    )
    table = pd.concat([small.assign(kind="s"), big.assign(kind="g")], ignore_index=True)
    table["job_id"] = [f"{k}{i}" for i, k in enumerate(table["kind"])]
    return normalise_jobs(table.assign(queue="train").drop(columns="kind"), source="bench jobs")


def snapshot(sched: Scheduler, now: pd.Timestamp) -> Workload:
    """The scheduler's state at ``now`` as the planner's workload (running placement, pending gangs)."""
    names = sched.cluster.node_names()
    used = np.zeros(NODES, dtype=int)
    out: list[JobSummary] = []
    attempts = sched.result().attempts
    live = attempts[(attempts["start"] <= now) & (attempts["end"] > now) & ~attempts["killed"]]
    for row in live.itertuples():
        gpus = np.array([int(g) for g in str(row.gpus).split()])
        nodes = gpus // G
        np.add.at(used, nodes, 1)
        per_pod = G if row.num_gpus > G else int(row.num_gpus)
        pods = tuple(names[n] for n in np.unique(nodes) for _ in range(max(1, int((nodes == n).sum()) // per_pod)))
        out.append(JobSummary("train", str(row.job_id), len(pods), per_pod, "running", nodes=pods))
    for row in sched.unstarted().itertuples():
        g = int(row.num_gpus)
        out.append(JobSummary("train", str(row.job_id), g // G if g > G else 1, G if g > G else g))
    nodes_ = tuple(NodeSummary(names[i], G, int(used[i])) for i in range(NODES))
    return Workload(tuple(out), nodes_, G)


def blocked_gang(work: Workload) -> JobSummary | None:
    """A pending whole-node gang the free GPUs could hold, but not the whole free nodes."""
    free = sum(n.free for n in work.nodes)
    whole = sum(n.free == n.gpus for n in work.nodes)
    waiting = [j for j in work.jobs if j.phase == "pending" and j.gpus_per_pod == G]
    for job in sorted(waiting, key=lambda j: j.name):
        if job.gpus <= free and job.pods > whole:
            return job
    return None


def measure(sched: Scheduler, now: pd.Timestamp, end: pd.Timestamp, gang: str) -> tuple[float, float, float]:
    """(gang start delay h, GPU-h allocated in [now, end], GPU-h lost to kills at ``now``)."""
    sched.run_until(end)
    a = sched.result().attempts
    started = a.loc[(a["job_id"] == gang) & ~a["killed"], "start"]
    delay = ((started.min() if len(started) else end) - now).total_seconds() / 3600
    lo = a["start"].clip(lower=now)
    hi = a["end"].clip(upper=end)
    allocated = float((((hi - lo).dt.total_seconds().clip(lower=0)) / 3600 * a["num_gpus"]).sum())
    killed = a[a["killed"] & (a["end"] == now)]
    lost = float(((killed["end"] - killed["start"]).dt.total_seconds() / 3600 * killed["num_gpus"]).sum())
    return delay, allocated, lost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=float, default=4.0)
    parser.add_argument("--every", type=float, default=2.0, help="hours between paused moments")
    parser.add_argument("--horizon", type=float, default=12.0, help="hours each copy runs on")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rate", type=float, default=16.0, help="small jobs per hour (load)")
    args = parser.parse_args()
    table = jobs(args.days, args.seed, args.rate)
    sched = Scheduler(
        table, ClusterSpec.uniform(NODES, gpus_per_node=G), [QueueSpec("train", deserved=NODES * G)], start=START
    )
    names = sched.cluster.node_names()
    rows = []
    t = START + pd.Timedelta(hours=12)
    while t + pd.Timedelta(hours=args.horizon) <= START + pd.Timedelta(days=args.days):
        sched.run_until(t)
        work = snapshot(sched, t)
        gang = blocked_gang(work)
        if gang is not None:
            advice = defrag_advice(work)
            end = t + pd.Timedelta(hours=args.horizon)
            as_is = measure(copy.deepcopy(sched), t, end, gang.name)
            drained = copy.deepcopy(sched)
            for node in advice.drain:
                drained.set_node_ready(names.index(node), False)
            for node in advice.drain:
                drained.set_node_ready(names.index(node), True)
            rows.append((t, gang.name, advice, as_is, measure(drained, t, end, gang.name)))
        t += pd.Timedelta(hours=args.every)
    show(rows, args)


def show(rows: list[tuple], args: argparse.Namespace) -> None:  # type: ignore[type-arg]
    out = Table(
        title=f"Defragmentation advice in the simulator: {NODES}×{G} GPUs, {args.days:g} days, seed "
        f"{args.seed}, {args.horizon:g} h after each blocked moment"
    )
    for name in (
        "moment",
        "gang",
        "drain",
        "FGD GPUs (rate) before",
        "after advice",
        "whole free nodes",
        "gang wait as is h",
        "with advice h",
        "lost GPU-h",
        "alloc GPU-h as is",
        "with advice",
    ):
        out.add_column(name, justify="right")
    totals = np.zeros(5)
    for t, gang, advice, as_is, adv in rows:
        b, a = advice.before, advice.after
        out.add_row(
            t.strftime("%a %H:%M"),
            gang,
            ",".join(n.removeprefix("node-") for n in advice.drain) or "-",
            f"{b.gpus:.1f} ({b.rate:.2f})",
            f"{a.gpus:.1f} ({a.rate:.2f})",
            f"{b.free_nodes}→{a.free_nodes}",
            f"{as_is[0]:.1f}",
            f"{adv[0]:.1f}",
            f"{adv[2]:.1f}",
            f"{as_is[1]:.0f}",
            f"{adv[1]:.0f}",
        )
        totals += [as_is[0], adv[0], adv[2], as_is[1], adv[1]]
    if rows:
        out.add_row(
            "total",
            str(len(rows)),
            "",
            "",
            "",
            "",
            f"{totals[0]:.1f}",
            f"{totals[1]:.1f}",
            f"{totals[2]:.1f}",
            f"{totals[3]:.0f}",
            f"{totals[4]:.0f}",
        )
    Console(width=160).print(out)
    if rows:
        net = totals[4] - totals[3]
        # Restarted work runs again inside the horizon and counts as allocation: goodput subtracts it.
        print(
            f"gang wait saved: {totals[0] - totals[1]:.1f} h over {len(rows)} blocked moments; restarts lost "
            f"{totals[2]:.1f} GPU-h; allocation in the horizons {net:+.0f} GPU-h ({net / totals[3]:+.2%}), "
            f"goodput (allocation − lost) {net - totals[2]:+.0f} GPU-h ({(net - totals[2]) / totals[3]:+.2%}) "
            "with the advice"
        )


if __name__ == "__main__":
    main()
