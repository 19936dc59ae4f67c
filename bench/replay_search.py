"""Choose the loop's planner settings inside leave-one-window-out folds, and score each choice where it was not chosen.

Usage, from the repository root:
    python -m bench.replay_search [--traces philly,alibaba] [--candidates default,cooldown-6h,...] [--jobs N]
        [--cache-dir DIR] [--data DIR]

The design space is ``CANDIDATES``: the planner's defaults and settings that trade wait for reclaim (a longer
cooldown, a wider dead band, shares not fitted to the cluster, the newsvendor's costs with guarantees kept within
what a queue asks for, those costs with a longer cooldown, and waiting queues' deserved lifted to what their gangs
ask for with event re-plans, with and without deserved planned below what a queue holds). Each is replayed with the
served ``auto`` forecaster (the ``loop/auto`` row of ``bench.replay``, sharing its cache) on every window, beside
static elastic quotas.

A fold holds one window out. Its candidates are compared on the windows that share no week with it (the
other trace's windows always qualify), and the one meeting the most goals there (``bench.replay_report.goals``;
ties: the lowest mean reclaim-lost as a share of static elastic's, then the lowest mean p95 wait as a share of
the p95 bound) is scored on the held-out window. Printed: every candidate's goals per window (in-sample, for
the record), then the folds, then how many held-out windows met each goal: the figure to quote.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

if not __package__:  # run as a file: import the packages from this repository
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.replay import REPO, plan_runs
from bench.replay_report import goals, p95_bound
from bench.replay_runs import Cache, Result, Row, cache_key, run_all, source_digest, window_jobs
from bench.replay_traces import TRACES, Window, load, windows
from predictor.errors import InputError
from predictor.planner import PlannerSettings
from predictor.planner.objective import Objective

__all__ = ["CANDIDATES", "Scores", "choose", "disjoint", "main"]

HOUR = 3600.0
# The design space: planner settings (``PlannerSettings`` fields) by name; ``default`` is the shipped planner.
COSTS: dict[str, Any] = {"guarantee_within_demand": True, "objective": Objective(reclaim_gpu_h=3, wait_gpu_h=0.5)}
# Waiting queues' deserved lifted to what their pending gangs ask for, re-planned within minutes of a wait.
REACT: dict[str, Any] = {"pending_raise": "lift", "react_pending_gpus": 8.0, "react_after_s": 300.0}
CANDIDATES: dict[str, dict[str, Any]] = {
    "default": {},
    "cooldown-6h": {"cooldown_s": 6 * HOUR},
    "cooldown-24h": {"cooldown_s": 24 * HOUR},
    "dead-band-25%": {"dead_band_rel": 0.25},
    "no-fit": {"fit_deserved_to_cluster": False},
    "costs": COSTS,
    "costs+cooldown-6h": {**COSTS, "cooldown_s": 6 * HOUR},
    "lift+react": REACT,
    "lift+react+below": {**REACT, "deserved_below_allocated": True},
}
LOOP = Row("loop/auto", "loop", forecaster="auto")
BASE = Row("static-elastic", "static-elastic")

# Per candidate, per window (trace, index): the loop's summary and static elastic's on the same window.
Scores = Mapping[str, Mapping[tuple[str, int], tuple[Mapping[str, float], Mapping[str, float]]]]


def disjoint(a: Window, b: Window) -> bool:
    """Whether two windows share no time (windows of different traces never do)."""
    return a.trace != b.trace or a.end <= b.start or b.end <= a.start


def _rank(scores: Scores, name: str, keys: Sequence[tuple[str, int]]) -> tuple[int, float, float]:
    met = lost = wait = 0.0
    for key in keys:
        ours, base = scores[name][key]
        met += sum(goals(ours, base))
        lost += ours["lost_gpu_h"] / max(base["lost_gpu_h"], 1.0)
        wait += ours["wait_p95_min"] / p95_bound(base)
    return (-int(met), lost / len(keys), wait / len(keys))


def choose(scores: Scores, keys: Sequence[tuple[str, int]]) -> str:
    """The candidate meeting the most goals on ``keys`` (ties: least relative reclaim-lost, then p95)."""
    if not keys:
        raise ValueError("a fold needs at least one window to choose on")
    return min(sorted(scores), key=lambda name: _rank(scores, name, keys))


def _verdict(ours: Mapping[str, float], base: Mapping[str, float]) -> str:
    good, lost, wait = goals(ours, base)
    marks = "".join(m if ok else "·" for m, ok in zip("GRW", (good, lost, wait), strict=True))
    lost_ratio = f"{ours['lost_gpu_h']:,.0f}/{base['lost_gpu_h']:,.0f}"
    return f"{marks} {lost_ratio} · {ours['wait_p95_min']:,.0f}/{base['wait_p95_min']:,.0f}"


def report(scores: Scores, chosen_windows: Sequence[Window], write: Any = print) -> None:
    keys = [(w.trace, w.index) for w in chosen_windows]
    write("Every candidate, in-sample (G goodput, R reclaim-lost, W p95 met; reclaim-lost ours/SE · p95 ours/SE):")
    write("")
    write("| candidate | " + " | ".join(f"{t} w{i}" for t, i in keys) + " | goals met |")
    write("|---|" + "---|" * len(keys) + "---:|")
    for name in scores:
        cells = [_verdict(*scores[name][k]) for k in keys]
        met = sum(sum(goals(*scores[name][k])) for k in keys)
        write(f"| {name} | " + " | ".join(cells) + f" | {met}/{3 * len(keys)} |")
    write("")
    write("Leave one window out (chosen on the windows sharing no week with the held-out one):")
    write("")
    write("| held out | chosen on | chosen | goodput | reclaim-lost | p95 wait |")
    write("|---|---|---|---|---|---|")
    held = [0, 0, 0]
    scored = 0
    for w in chosen_windows:
        train = [(v.trace, v.index) for v in chosen_windows if disjoint(v, w)]
        if not train:
            write(f"| {w.trace} w{w.index} | no window shares no week with it | – | – | – | – |")
            continue
        scored += 1
        pick = choose(scores, train)
        ours, base = scores[pick][(w.trace, w.index)]
        ok = goals(ours, base)
        held = [h + o for h, o in zip(held, ok, strict=True)]
        where = ", ".join(f"{t} w{i}" for t, i in train)
        write(
            f"| {w.trace} w{w.index} | {where} | {pick} | {'met' if ok[0] else '**not**'}: "
            f"{ours['goodput_gpu_h'] - base['goodput_gpu_h']:+,.0f} | {'met' if ok[1] else '**not**'}: "
            f"{ours['lost_gpu_h']:,.1f} vs {base['lost_gpu_h']:,.1f} | {'met' if ok[2] else '**not**'}: "
            f"{ours['wait_p95_min']:,.1f} vs {p95_bound(base):,.1f} |"
        )
    n = scored
    write("")
    write(f"Held out: goodput met on {held[0]}/{n} windows, reclaim-lost on {held[1]}/{n}, p95 wait on {held[2]}/{n}.")
    overall = choose(scores, keys)
    per_window = fmean(sum(goals(*scores[overall][k])) for k in keys)
    write(f"Chosen on every window at once: {overall} ({per_window:.2f} goals a window).")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replay_search", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--traces", default="philly,alibaba", help=f"some of {', '.join(TRACES)}")
    parser.add_argument("--candidates", default=",".join(CANDIDATES), help="which of CANDIDATES to replay")
    parser.add_argument("--jobs", type=int, default=1, help="replays at a time (processes)")
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/bench-replay-cache"), help="per-run results")
    parser.add_argument("--cached", action="store_true", help="report only candidates whose runs are all cached")
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data", help="the public traces")
    args = parser.parse_args(argv)
    names = [n for n in args.candidates.split(",") if n]
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown or not names:
        what = f"{unknown[0]} is not one of" if unknown else "name at least one of"
        print(f"error: --candidates: {what} {', '.join(CANDIDATES)}", file=sys.stderr)
        return 1
    if args.jobs < 1:
        print(f"error: --jobs {args.jobs}: must be ≥ 1", file=sys.stderr)
        return 1
    try:
        traces = [load(n, args.data) for n in args.traces.split(",") if n]
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    every = [w for t in traces for w in windows(t, 4.0)]
    by_name = {t.name: t for t in traces}
    cache, source = Cache(args.cache_dir), source_digest(REPO)

    def jobs(w: Window) -> Any:
        return window_jobs(by_name[w.trace].jobs, w)

    def results(row: Row, planner: PlannerSettings) -> dict[tuple[str, int], dict[str, float]]:
        runs = plan_runs(traces, every, [0], [row], "drain", 0.95)
        if args.cached and not all(cache.get(cache_key(run, jobs(run.window), planner, source)) for run in runs):
            return {}
        done: list[Result] = run_all(runs, jobs, planner, cache, source, workers=args.jobs)
        return {(r.trace, r.window): r.summary for r in done}

    # The cache is keyed on a digest of the replay's code: runs cached by other code are not found.
    stale = "not cached for this code state (run without --cached to replay them)"
    base = results(BASE, PlannerSettings())
    if not base:
        print(f"error: static elastic quotas' runs are {stale}", file=sys.stderr)
        return 1
    scores = {}
    for name in names:
        ours = results(LOOP, PlannerSettings.model_validate(CANDIDATES[name]))
        if not ours:
            print(f"{name}: some runs are {stale}; left out", file=sys.stderr)
            continue
        scores[name] = {key: (ours[key], base[key]) for key in base}
    if not scores:
        print(f"error: every candidate has runs {stale}", file=sys.stderr)
        return 1
    report(scores, every)
    return 0


if __name__ == "__main__":
    sys.exit(main())
