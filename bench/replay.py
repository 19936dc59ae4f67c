"""Benchmark the quota policies in replay: every row on every window of every trace, several seeds each.

Usage, from the repository root:
    python -m bench.replay [--traces philly,alibaba[,recurring,synthetic]] [--windows all|0,2] [--seeds 1|0,3]
        [--weeks 4] [--rows static-elastic,loop,...] [--jobs N] [--cache-dir DIR] [--no-cache]
        [--data DIR] [--sizing drain|mean] [--load 0.95] [planner settings, below]

What is measured (``bench.replay_traces``): Philly's 10 weeks cut into every 4-week window stepping one week
(7 windows), Alibaba's whole span (one window), and with ``--traces recurring`` a synthetic trace of daily
jobs asking more GPUs than they use (``bench.replay_recurring``), where right-sizing has requests to change
(``synthetic``: the earlier synthetic trace, its published figures reproducible).
A seed draws the jobs' usage profiles only; the scheduler is deterministic.

Each window is sized by one rule (``bench.replay_sizing``, ``--sizing``): by default the smallest cluster on
which a work-conserving, quota-free scheduler with fluid GPUs leaves no backlog at the end. Replays run with
Volcano's reclaim and preempt actions on, jobs checkpointing hourly and paying 5 minutes to restart
(``predictor.replay`` defaults).

The rows (``bench.replay_runs``): the replay's policies, the loop once per forecaster where the replay lets
it be chosen, and a quota-free reference. One run per (trace, window, seed, row), cached under
``--cache-dir`` by its inputs and the digest of the code it ran (a code change runs it again), ``--jobs``
at a time, a progress line each on stderr.

Printed (``bench.replay_report``): per trace, the windows, a table of every row as mean (min–max) over
windows × seeds, the goals per window for the default loop against static elastic quotas (marking the
windows the defaults were chosen on), and the value of information of the forecast.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import NoReturn

if not __package__:  # run as a file (python bench/replay.py): import the packages from this repository
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.replay_report import report
from bench.replay_runs import Cache, Result, Row, Run, rows, run_all, source_digest, window_jobs
from bench.replay_sizing import fluid, fluid_bound, hourly_demand, sized_nodes
from bench.replay_traces import TRACES, Trace, Window, load, windows
from predictor.errors import InputError
from predictor.planner import PlannerSettings

__all__ = ["fluid", "fluid_bound", "hourly_demand", "main", "sized_nodes"]

REPO = Path(__file__).resolve().parents[1]
GPUS_PER_NODE = 8


class FlagError(Exception):
    """A flag value the benchmark cannot use (printed as one line)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line, not the usage block: ``error: argument --jobs: invalid int value: 'x'``."""
        self.exit(2, f"error: {message}\n")


def _ints(flag: str, text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise FlagError(f"{flag} {text!r}: expected whole numbers separated by commas") from None
    if not values or min(values) < 0:
        raise FlagError(f"{flag} {text!r}: expected whole numbers ≥ 0 separated by commas")
    return values


def seeds_of(text: str) -> list[int]:
    """``--seeds``: ``N`` runs seeds 0 … N−1; a list (``0,3``) runs those seeds."""
    values = _ints("--seeds", text)
    if "," in text:
        return sorted(set(values))
    if values[0] < 1:
        raise FlagError("--seeds 0: run at least one seed (N runs seeds 0 … N−1; a list such as 0,3 runs those)")
    return list(range(values[0]))


def windows_of(text: str, traces: list[Trace], weeks: float) -> list[Window]:
    """``--windows``: ``all``, or window indices (each trace keeps those it has)."""
    every = [w for t in traces for w in windows(t, weeks)]
    if text == "all":
        return every
    wanted = set(_ints("--windows", text))
    chosen = [w for w in every if w.index in wanted]
    counts = ", ".join(f"{t.name} {len(windows(t, weeks))}" for t in traces)
    missing = wanted - {w.index for w in chosen}
    if missing:
        raise FlagError(f"--windows {text}: no trace has window {min(missing)} (windows per trace: {counts})")
    return chosen


def rows_of(text: str | None) -> list[Row]:
    every = rows()
    if text is None:
        return every
    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in {r.name for r in every}]
    if unknown or not names:
        raise FlagError(
            f"--rows {text!r}: {unknown[0] if unknown else 'empty'}; known: {', '.join(r.name for r in every)}"
        )
    return [r for r in every if r.name in names]


def _planner_flags(parser: argparse.ArgumentParser) -> None:
    p = parser.add_argument_group("planner settings (the planned rows)")
    p.add_argument("--borrow", choices=("idle", "forecast"), default="idle", help="planner.borrow")
    p.add_argument("--deserved-below-allocated", action="store_true", help="planner.deserved_below_allocated")
    p.add_argument("--guarantee-within-demand", action="store_true", help="planner.guarantee_within_demand")
    p.add_argument("--pending-raise", choices=("off", "target", "lift"), default="off", help="planner.pending_raise")
    p.add_argument("--react-pending-gpus", type=float, default=0.0, help="planner.react_pending_gpus (0: hourly only)")
    p.add_argument("--react-after-min", type=float, default=10.0, help="planner.react_after_s, in minutes")
    p.add_argument("--objective", action="store_true", help="plan with planner.objective (default costs)")
    p.add_argument("--wait-gpu-h", type=float, default=None, help="planner.objective.wait_gpu_h (implies --objective)")
    p.add_argument(
        "--reclaim-gpu-h", type=float, default=None, help="planner.objective.reclaim_gpu_h (implies --objective)"
    )
    p.add_argument(
        "--tail-quantile", type=float, default=None, help="planner.tail_quantile (None: the planner default)"
    )
    p.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other planner setting, e.g. cooldown_s=21600 (repeatable; VALUE read as JSON, else as text)",
    )


def settings_of(pairs: list[str]) -> dict[str, object]:
    """``--set KEY=VALUE`` pairs as planner settings (``VALUE`` parsed as JSON where it is JSON)."""
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise FlagError(f"--set {pair!r}: expected KEY=VALUE, e.g. cooldown_s=21600")
        try:
            out[key.strip()] = json.loads(text)
        except ValueError:
            out[key.strip()] = text
    return out


def planner_of(args: argparse.Namespace) -> PlannerSettings:
    from pydantic import ValidationError

    from predictor.planner.objective import Objective

    costs = {k: v for k, v in (("wait_gpu_h", args.wait_gpu_h), ("reclaim_gpu_h", args.reclaim_gpu_h)) if v is not None}
    try:
        return PlannerSettings.model_validate(
            {
                "borrow": args.borrow,
                "deserved_below_allocated": args.deserved_below_allocated,
                "guarantee_within_demand": args.guarantee_within_demand,
                "pending_raise": args.pending_raise,
                "react_pending_gpus": args.react_pending_gpus,
                "react_after_s": 60 * args.react_after_min,
                "objective": Objective.model_validate(costs) if args.objective or costs else None,
            }
            | ({} if args.tail_quantile is None else {"tail_quantile": args.tail_quantile})
            | settings_of(args.settings)
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        raise FlagError(f"planner setting {'.'.join(map(str, error['loc']))}: {error['msg']}") from None


def parser() -> argparse.ArgumentParser:
    out = _Parser(
        prog="python -m bench.replay",
        description=(__doc__ or "").splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    out.add_argument("--traces", "--datasets", default="philly,alibaba", help=f"some of {', '.join(TRACES)}")
    out.add_argument("--windows", default="all", help="'all' or window indices per trace, e.g. 0,3")
    out.add_argument("--seeds", default="1", help="N: seeds 0 … N−1; a list such as 0,3: those seeds")
    out.add_argument("--weeks", type=float, default=4.0, help="window length (Alibaba: at most its span)")
    out.add_argument("--rows", "--policies", default=None, help="only these rows, comma-separated (default: every row)")
    out.add_argument("--jobs", type=int, default=1, help="replays at a time (processes)")
    out.add_argument("--cache-dir", type=Path, default=Path("/tmp/bench-replay-cache"), help="per-run results")
    out.add_argument("--no-cache", action="store_true", help="run everything, read and write no cache")
    out.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data", help="the public traces")
    out.add_argument("--sizing", choices=("drain", "mean"), default="drain", help="cluster size rule")
    out.add_argument("--load", type=float, default=0.95, help="with --sizing mean: mean demand ÷ capacity")
    _planner_flags(out)
    return out


def plan_runs(
    traces: list[Trace], chosen: list[Window], seeds: list[int], which: list[Row], sizing: str, load: float
) -> list[Run]:
    """Every (window, seed, row) run, each window sized once by the sizing rule."""
    by_name = {t.name: t for t in traces}
    runs = []
    for w in chosen:
        jobs = by_name[w.trace].jobs
        capacity = sized_nodes(jobs, w.start, w.end, load, GPUS_PER_NODE, sizing)
        bound = fluid_bound(jobs, w.start, w.end, capacity * GPUS_PER_NODE)
        runs += [Run(w, seed, row, capacity, bound) for seed in seeds for row in which]
    return runs


def trace_names(args: argparse.Namespace) -> list[str]:
    """The ``--traces`` names, after the window and cluster flags every replay of them needs are checked."""
    if not 0 < args.weeks <= 60:
        raise FlagError(f"--weeks {args.weeks:g}: must be in (0, 60]")
    if not 0 < args.load <= 1:
        raise FlagError(f"--load {args.load:g}: must be in (0, 1]")
    names = [n for n in args.traces.split(",") if n]
    if not names or any(n not in TRACES for n in names):
        raise FlagError(f"--traces {args.traces!r}: expected some of {', '.join(TRACES)}")
    return names


def run(args: argparse.Namespace) -> list[Result]:
    if args.jobs < 1:
        raise FlagError(f"--jobs {args.jobs}: must be ≥ 1")
    names = trace_names(args)
    seeds, which, planner = seeds_of(args.seeds), rows_of(args.rows), planner_of(args)
    if args.windows != "all":
        _ints("--windows", args.windows)  # the syntax now; which indices exist needs the traces loaded
    traces = [load(n, args.data) for n in names]
    chosen = windows_of(args.windows, traces, args.weeks)
    runs = plan_runs(traces, chosen, seeds, which, args.sizing, args.load)
    by_name = {t.name: t for t in traces}
    cache = Cache(None if args.no_cache else args.cache_dir)
    print(
        f"{len(runs)} runs: {len(chosen)} window(s) × {len(seeds)} seed(s) × {len(which)} rows "
        f"({', '.join(r.name for r in which)}); sizing {args.sizing}; planner settings other than the "
        f"defaults: {planner.model_dump(mode='json', exclude_defaults=True) or 'none'}",
        flush=True,
    )
    return run_all(
        runs, lambda w: window_jobs(by_name[w.trace].jobs, w), planner, cache, source_digest(REPO), workers=args.jobs
    )


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    t0 = time.perf_counter()
    try:
        results = run(args)
    except (FlagError, InputError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    report(results)
    fresh = [r.seconds for r in results if not r.cached]
    per_run = f"{sum(fresh) / len(fresh):,.0f} s per fresh run" if fresh else "all from the cache"
    print(f"\n{len(results)} runs ({len(fresh)} fresh, {per_run}); wall {time.perf_counter() - t0:,.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
