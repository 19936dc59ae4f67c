"""Where a replay's p95 wait comes from: the jobs that wait past the goal's bound, by queue and by day.

Why it exists: the replay goal "p95 wait ≤ 1.1 × static elastic's + 10 min" holds when at most about 5 % of the
jobs submitted in the window wait longer than that bound (about: the p95 interpolates between two jobs' waits; a
job never started waits until the window ends, as in ``bench.replay``). Where a few percent of the jobs wait hours
under every policy, the p95 is decided by which side of 5 % a policy lands, and the p95 cell alone cannot say how
far a policy is from the goal. This replays the same runs as ``python -m bench.replay`` (same trace windows,
``drain`` sizing, rows and planner flags) and counts the jobs past the bound.

Usage, from the repository root:
    python -m bench.experiments.replay_tail --traces alibaba [--windows 0] [--rows static-elastic,loop/auto]
                                            [any planner flag of bench.replay, e.g. --set KEY=VALUE]

It takes ``bench.replay``'s flags, and replays seed 0 only, one run at a time, without its cache (``--seeds``,
``--jobs``, ``--cache-dir`` and ``--no-cache`` do nothing here).

Output per window and row: p95 wait, the bound, the jobs past it (and the share of the window's jobs), how
many of them never started, and the jobs past it per queue and per day.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np
import pandas as pd

from bench.replay import GPUS_PER_NODE, FlagError, parser, plan_runs, planner_of, rows_of, trace_names, windows_of
from bench.replay_report import p95_bound
from bench.replay_runs import window_jobs
from bench.replay_traces import Window, load
from predictor.errors import InputError
from predictor.replay import ReplaySettings, replay

SHARE = 0.05  # a p95 is exceeded by the longest-waiting 5 % of jobs


def waits(jobs: pd.DataFrame, attempts: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
    """Per job submitted in ``[start, end)``: its queue, submit time and first-attempt wait in minutes; a job
    never started waits until ``end`` (``never``), as ``predictor.replay.measures`` counts it."""
    inside = jobs[(jobs["submit"] >= start) & (jobs["submit"] < end)]
    first = attempts[attempts["attempt"] == 0].set_index("job_id")["wait_s"]
    wait_s = inside["job_id"].map(first)
    never = wait_s.isna()
    until_end = (end - inside["submit"]).dt.total_seconds()
    return pd.DataFrame(
        {
            "queue": inside["queue"].astype(str).to_numpy(),
            "submit": inside["submit"].to_numpy(),
            "wait_min": np.where(never, until_end, wait_s).astype(float) / 60,
            "never": never.to_numpy(),
        }
    )


def tail_lines(name: str, w: pd.DataFrame, bound: float) -> list[str]:
    """The report of one row: p95, the jobs past ``bound`` minutes, per queue and per day."""
    past = w[w["wait_min"] > bound]
    p95 = float(np.percentile(w["wait_min"], 95)) if len(w) else 0.0
    allowed = int(SHARE * len(w))
    lines = [
        f"{name}: p95 {p95:.1f} min; {len(past)} of {len(w)} jobs ({len(past) / max(len(w), 1):.1%}) wait more "
        f"than {bound:.1f} min, {int(past['never'].sum())} of them never started; the goal allows {allowed}"
    ]
    if len(past):
        by_queue = past.groupby("queue").agg(jobs=("wait_min", "size"), median_min=("wait_min", "median"))
        lines.append(
            "  by queue: " + ", ".join(f"{q} {int(r.jobs)} ({r.median_min:.0f} min)" for q, r in by_queue.iterrows())
        )
        days = past.groupby(pd.DatetimeIndex(past["submit"]).floor("D")).size()
        lines.append("  by day submitted: " + ", ".join(f"{pd.Timestamp(str(d)).date()} {n}" for d, n in days.items()))
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    cli = parser()
    cli.prog = "python -m bench.experiments.replay_tail"
    cli.description = (__doc__ or "").splitlines()[0]
    args = cli.parse_args(argv)
    try:
        names, planner, which = trace_names(args), planner_of(args), rows_of(args.rows)
        if "static-elastic" not in {r.name for r in which}:
            raise FlagError("--rows must include static-elastic: the bound is 1.1 × its p95 + 10 min")
        one_queue = [r.name for r in which if r.one_queue]
        if one_queue and args.rows is not None:
            raise FlagError(f"--rows {one_queue[0]}: one queue for every job, nothing to count by queue")
        traces = [load(n, args.data) for n in names]
        runs = plan_runs(traces, windows_of(args.windows, traces, args.weeks), [0], which, args.sizing, args.load)
    except (FlagError, InputError) as exc:
        sys.exit(f"error: {exc}")
    by_name = {t.name: t for t in traces}
    per_window: dict[Window, dict[str, pd.DataFrame]] = {}
    for run in (r for r in runs if not r.row.one_queue):  # without --rows: every row but quota-free
        jobs = window_jobs(by_name[run.window.trace].jobs, run.window)
        settings = ReplaySettings(
            nodes=run.nodes,
            start=run.window.start,
            weeks=run.window.weeks,
            policy=run.row.policy,
            planner=planner,
            forecaster=run.row.forecaster or "auto",
        )
        schedule = replay(jobs, settings).schedule
        assert schedule is not None  # every replay returns its schedule
        per_window.setdefault(run.window, {})[run.row.name] = waits(
            jobs, schedule.attempts, run.window.start, run.window.end
        )
        print(f"  {run.window.trace} w{run.window.index} {run.row.name}: replayed", file=sys.stderr, flush=True)
    for window, per_row in per_window.items():
        nodes = next(r.nodes for r in runs if r.window == window)
        print(f"## {window.trace} {window.label}: {nodes} nodes × {GPUS_PER_NODE} GPUs")
        bound = p95_bound({"wait_p95_min": float(np.percentile(per_row["static-elastic"]["wait_min"], 95))})
        for name, w in per_row.items():
            print("\n".join(tail_lines(name, w, bound)))


if __name__ == "__main__":
    main()
