"""Plans between the loop's and static elastic quotas': whether any of them meets all three replay goals.

Why it exists: the replay's goals ask the loop to match or beat static elastic quotas on goodput, reclaim-lost
GPU-hours and p95 wait at once. On Alibaba the loop keeps far less reclaim-lost and misses the p95 wait; static
elastic quotas reach their tail by evicting the services of apps that outgrew their warm-up-week share. This replays
the loop with its deserved pulled toward that share by a weight λ, to measure the frontier between the two:
deserved = round(λ × the queue's static elastic deserved + (1 − λ) × the loop's planned deserved) in whole GPUs
(half to even), the loop's guarantee capped at that, capability as the loop plans it. A queue the loop holds (dead
band, cooldown, a hold on every queue) keeps its live quota, so λ is not applied twice. λ = 0 is the loop; λ = 1 holds
static elastic's deserved. The pulled deserved may sit below what a queue holds (that makes its work reclaimable,
which is the point) and Σ deserved may pass the cluster, as unfitted shares do. A plan family, not a planner
setting: it exists to say whether one exists that meets the goals, and the product does not ship it.

Usage, from the repository root:
    python -m bench.experiments.replay_anchor --traces alibaba --weights 0,0.25,0.5,0.75,1 [--windows 0]
                                              [any planner flag of bench.replay, e.g. --set KEY=VALUE]

It takes ``bench.replay``'s flags and replays seed 0 with the served ``auto`` forecaster, one run at a time,
without its cache (``--rows``, ``--seeds``, ``--jobs``, ``--cache-dir`` and ``--no-cache`` do nothing here).
Output per window: static elastic's goodput, reclaim-lost and p95 wait, then one line per weight with the same
and the three goals (``bench.replay_report.goals``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any
from unittest import mock

import pandas as pd

import predictor.replay.run as replay_run
from bench.replay import FlagError, parser, plan_runs, planner_of, rows_of, trace_names, windows_of
from bench.replay_report import goals
from bench.replay_runs import window_jobs
from bench.replay_traces import load
from predictor.errors import InputError
from predictor.planner import QueuePlan
from predictor.replay import ReplayResult, ReplaySettings, replay
from predictor.sim import Quota


def anchored(planned: Mapping[str, Quota], anchor: Mapping[str, float], weight: float) -> dict[str, Quota]:
    """The loop's planned quotas with each deserved pulled toward ``anchor`` by ``weight`` (whole GPUs), and the
    guarantee kept within it."""
    out = {}
    for name, quota in planned.items():
        pulled = float(round(weight * anchor[name] + (1 - weight) * (quota.deserved or 0.0)))
        out[name] = quota._replace(deserved=pulled, guarantee=min(quota.guarantee or 0.0, pulled))
    return out


def anchored_planner(weight: float) -> type[replay_run._Planner]:
    """The replay's planner, its every new plan pulled toward the deserved it started from: static-hard's, which
    are static elastic's (``predictor.replay.run.HARD``)."""

    class Anchored(replay_run._Planner):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.anchor = {name: quota.deserved or 0.0 for name, quota in self.quota.items()}

        def quotas_of(self, plan: QueuePlan) -> dict[str, Quota]:
            planned = super().quotas_of(plan)
            moved = {name: quota for name, quota in planned.items() if quota != self.quota[name]}
            return planned | anchored(moved, self.anchor, weight)  # a held queue's live quota is pulled already

    return Anchored


def replay_anchored(jobs: pd.DataFrame, settings: ReplaySettings, weight: float) -> ReplayResult:
    """``jobs`` replayed under ``settings`` (a planned policy) with every plan pulled by ``weight``. The replay
    builds its planner from the module's ``_Planner``, so that is swapped for the run."""
    with mock.patch.object(replay_run, "_Planner", anchored_planner(weight)):
        return replay(jobs, settings)


def weights_of(text: str) -> list[float]:
    try:
        weights = [float(w) for w in text.split(",") if w]
    except ValueError:
        raise FlagError(f"--weights {text!r}: expected numbers between 0 and 1, comma-separated") from None
    if not weights or any(not 0 <= w <= 1 for w in weights):
        raise FlagError(f"--weights {text!r}: expected numbers between 0 and 1, comma-separated")
    return weights


def line(name: str, s: Mapping[str, float]) -> str:
    return (
        f"{name}: goodput {s['goodput_gpu_h']:,.1f} GPU-h, reclaim-lost {s['lost_gpu_h']:,.2f} GPU-h, "
        f"p95 wait {s['wait_p95_min']:,.1f} min"
    )


def main(argv: Sequence[str] | None = None) -> None:
    cli = parser()
    cli.prog = "python -m bench.experiments.replay_anchor"
    cli.description = (__doc__ or "").splitlines()[0]
    cli.add_argument("--weights", default="0,0.25,0.5,0.75,1", help="λ values, comma-separated, each in [0, 1]")
    args = cli.parse_args(argv)
    try:
        names, planner, weights = trace_names(args), planner_of(args), weights_of(args.weights)
        traces = [load(n, args.data) for n in names]
        runs = plan_runs(
            traces, windows_of(args.windows, traces, args.weeks), [0], rows_of("static-elastic"), args.sizing, args.load
        )
    except (FlagError, InputError) as exc:
        sys.exit(f"error: {exc}")
    by_name = {t.name: t for t in traces}
    for run in runs:
        w = run.window
        jobs = window_jobs(by_name[w.trace].jobs, w)
        elastic = ReplaySettings(
            nodes=run.nodes, start=w.start, weeks=w.weeks, policy="static-elastic", planner=planner
        )
        print(f"## {w.trace} {w.label}: {run.nodes} nodes", flush=True)
        base = replay(jobs, elastic).summary
        print(line("static-elastic", base), flush=True)
        for weight in weights:
            ours = replay_anchored(jobs, replace(elastic, policy="loop"), weight).summary
            met = ", ".join(
                f"{goal} {'met' if ok else 'NOT'}"
                for goal, ok in zip(("goodput", "reclaim-lost", "p95"), goals(ours, base), strict=True)
            )
            print(f"{line(f'λ = {weight:g}', ours)}; {met}", flush=True)


if __name__ == "__main__":
    main()
