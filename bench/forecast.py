"""Benchmark every forecaster and ``auto`` across traces, worst held-out trace first.

Usage, from the repository root:
    python -m bench.forecast [--data ../shared/data] [--traces philly,alibaba,sim,sim2,sim3] [--models a,b]
        [--quick] [--jobs N] [--outer 8] [--slow-inner 2 | --frozen] [--cache DIR]
        [--calibration weekly|daily|self|fresh|fresh-abs]

Every model is backtested once per trace over many rolling origins (h = 168, a new origin every 24 h; cached
under --cache, a directory stamped with the forecasting code's digest: records another code state wrote are
refused, ``bench.forecast_cache``). ``auto`` is replayed on those records exactly as ``AutoForecaster``
would choose at each origin: from the windows whose actuals all precede the origin, a week apart (its
``step``). Its selection rule is tuned leave-one-trace-out: for each held-out trace the rule with the lowest
worst-case MAE ratio to the best baseline on the *other* traces is scored on the held-out one; the interval
``gamma`` is tuned the same way on coverage. The rules include the shipped pool with a seasonal pool
(``SEASONAL_POOLS``) served where a series' daily cycle is strong (``SEASONAL_FROM``, the strength measured
over the 14 days before each origin, as ``auto``'s gate does); ``level_profile`` is a model, not a baseline.

Output: one table per trace (MAE in GPUs, MASE, pinball p90, coverage 80/95, seconds per fit); then the
headline, the worst held-out trace's MAE relative to its best baseline (below 1: ``auto`` beats every simple
rule on every trace it was not tuned on), and the held-out coverage with its standard error over series
(``bench.forecast_report.series_bootstrap``).

Flags:
- ``--models`` (default: every baseline, lstm and lstm_global) and ``--traces`` (``bench.forecast_traces``;
  Philly and Alibaba read from ``--data``) choose what is backtested; ``--jobs`` backtests in parallel.
- ``--quick`` drops mstl, lstm and lstm_global and scores at most 8 origins.
- ``--outer N`` scored origins per trace. mstl and lstm (fits of many seconds per origin) are backtested at
  the scored origins and, with ``--slow-inner N``, at the inner origins of the first N scored ones. With
  N ≥ --outer they are full candidates, so every rule, per-series choices included, sees them at every
  origin; with fewer, pools that contain them are scored as fixed pools (always served) and their coverage
  only where their bands could be conformalised. The full run is ``--outer 8 --slow-inner 8`` (minutes with
  a cold cache, seconds from a warm one).
- ``--frozen``: the slow models' inner origins are forecast as ``auto``'s own backtest forecasts them: by one
  network trained at the oldest origin and fed each newer history (``models.forecast.frozen``; one network
  per trace, so at the first scored origins a little staler than auto's own), while the scored origins keep
  a network trained there, as auto serves one.
- ``--calibration`` picks how ``auto``'s intervals are replayed (``bench.forecast_intervals``): ``fresh`` is
  what auto serves (each member's bands on its own errors, the LSTM's from one network trained at the newest
  inner origin and in units of that network's band, ``models.forecast.memberwise``; LSTM records
  ``{trace}-lstm-w{outer + 7}.pkl``, a fit at every origin; gamma 1, nothing tuned across traces);
  ``fresh-abs`` the same with the LSTM's shift in GPUs (an earlier design); ``weekly`` CQR on the weekly inner
  windows (the design before ``fresh``); ``daily`` on daily ones; ``self`` the fit's self-tuned multiplier
  (``bench.experiments.forecast_selftune``; no gamma tuned across traces). The calibration run is
  ``--outer 8 --frozen --models <every baseline but mstl>,lstm``.

``lstm_global`` (``bench.forecast_global``) is one LSTM per held-out trace trained on the other traces and
served frozen, so it is a full candidate at every origin whatever --slow-inner is.
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.forecast_cache import claim_cache
from bench.forecast_global import GLOBAL, GLOBAL_POOLS, GLOBAL_WEIGHTED, backtest_global, global_jobs
from bench.forecast_intervals import GAP
from bench.forecast_report import INNER, INNER_STEP, LEVELS, SLOW, STEP, H, mase_scales, model_rows, report
from bench.forecast_traces import load_traces
from models.forecast import forecasters, run_backtest
from models.forecast.auto import DEFAULT_CANDIDATES
from models.forecast.decomposition import daily_strength
from models.forecast.frozen import train_once
from models.forecast.gate import GATE_DAYS
from models.forecast.prep import regularize
from models.forecast.selection import DEFAULT_RULE, SelectionRule, choose

REPO = Path(__file__).resolve().parents[1]

FROZEN = -1  # --slow-inner's value under --frozen
FRESH = "lstm_fresh"  # --calibration fresh: the LSTM fitted at every origin up to the newest inner one
# level_profile is a model this project built (a decomposition fitted to no trace): not a baseline
LEARNT = ("lstm", "level_profile")
BASELINES = tuple(name for name in DEFAULT_CANDIDATES if name not in LEARNT)  # every other candidate
POOLS = {
    "n+w24+w168+ets": ("naive", "window_mean_24", "window_mean_168", "ets"),
    "w24+w168+ets": ("window_mean_24", "window_mean_168", "ets"),
    "n+w168+ets+sm24": ("naive", "window_mean_168", "ets", "seasonal_mean_24"),
    "n+w24+w168+ets+mstl": ("naive", "window_mean_24", "window_mean_168", "ets", "mstl"),
    "w168+ets": ("window_mean_168", "ets"),
    "w168+sm24": ("window_mean_168", "seasonal_mean_24"),
    "w168+sm24+ets": ("window_mean_168", "seasonal_mean_24", "ets"),
    "d+w168+sm24+ets": ("drift", "window_mean_168", "seasonal_mean_24", "ets"),
    "n+d+w168+sm24": ("naive", "drift", "window_mean_168", "seasonal_mean_24"),
    "w24+w168+sm24+ets+mstl": ("window_mean_24", "window_mean_168", "seasonal_mean_24", "ets", "mstl"),
    "w168+sm24+ets+lstm": ("window_mean_168", "seasonal_mean_24", "ets", "lstm"),
    # the seasonal median, robust to drains (the simulated traces' best baseline)
    "smed24+w168": ("seasonal_median_24", "window_mean_168"),
    "d+smed24": ("drift", "seasonal_median_24"),
    "n+d+smed24+sm24": ("naive", "drift", "seasonal_median_24", "seasonal_mean_24"),
}
# Pools with a slow member are scored as fixed pools (margin 1: always served), which needs no inner origins.
FIXED_POOLS = (
    ("naive", "lstm"),
    ("drift", "lstm"),
    ("naive", "drift", "lstm"),
    ("ets", "lstm"),
    ("window_mean_168", "lstm"),
    ("window_mean_168", "seasonal_mean_24", "ets", "lstm"),
    ("naive", "mstl", "lstm"),
    ("lstm",),
    ("naive", "ets", "mstl"),
    ("seasonal_median_24", "lstm"),
    ("seasonal_median_24", "drift", "lstm"),
)
# Pools led by the LSTM, shrunk toward persistence / trend / damped trend (member weights after the names);
# scored as per-series choices when the slow models have inner records, else as fixed pools.
WEIGHTED = tuple(
    (("lstm", *rest), (w, *[round((1 - w) / len(rest), 3)] * len(rest)))
    for rest in (
        ("naive",),
        ("drift",),
        ("ets",),
        ("naive", "drift"),
        ("naive", "ets"),
        ("seasonal_median_24",),
        ("seasonal_median_24", "drift"),
    )
    for w in (0.5, 0.6, 0.7, 0.8, 0.9)
)
POOLS.update(GLOBAL_POOLS)  # pools led by, or containing, the network trained on the other traces
WEIGHTED = (*WEIGHTED, *GLOBAL_WEIGHTED)
MARGINS = (0.0, 0.05, 0.1, 0.2, 1.0)  # 1: the pool is always served
# The shipped pool, with a seasonal pool where a series' daily cycle is at least this strong
SEASONAL_POOLS = (
    (("lstm", "level_profile"), (0.5, 0.5)),
    (("lstm", "level_profile"), (0.3, 0.7)),
    (("lstm", "level_profile"), (0.7, 0.3)),
    (("lstm", "seasonal_median_24"), (0.5, 0.5)),
)
SEASONAL_FROM = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3)


def _backtest_one(args: tuple[str, pd.DataFrame, str, int, Path, int]) -> tuple[str, pd.DataFrame, float, int]:
    trace, frame, model, windows, cache, slow_inner = args
    if model not in SLOW:
        return _backtest_cached(frame, model, windows, cache / f"{trace}-{model}-w{windows}.pkl")
    outer = windows - INNER * INNER_STEP // STEP
    if slow_inner < 0:  # --frozen: the inner origins as auto's backtest sees them (models.forecast.frozen)
        parts = [_backtest_cached(frame, model, outer, cache / f"{trace}-{model}-w{outer}.pkl")]
        path = cache / f"{trace}-{model}-frozen{windows}.pkl"
        _, rec, sec, fits = _backtest_cached(frame, model, windows, path, frozen=True)
        parts.append((model, rec[rec["window"] >= outer], sec, fits))
        return model, pd.concat([p[1] for p in parts], ignore_index=True), sum(p[2] for p in parts), outer + 1
    # slow models: the scored origins, plus the inner origins of the first ``slow_inner`` scored ones
    parts = [_backtest_cached(frame, model, outer, cache / f"{trace}-{model}-w{outer}.pkl")]
    extra = sorted(
        {o + j * INNER_STEP // STEP for o in range(slow_inner) for j in range(1, INNER + 1)} - {*range(outer)}
    )
    for w in extra:
        end = frame.groupby("series_id")["timestamp"].transform("max") - pd.Timedelta(hours=w * STEP)
        try:
            _, rec, sec, fits = _backtest_cached(
                frame[frame["timestamp"] <= end], model, 1, cache / f"{trace}-{model}-x{w}.pkl"
            )
        except ValueError:  # the trace is too short for that origin
            continue
        parts.append((model, rec.assign(window=w), sec, fits))
    records = pd.concat([p[1] for p in parts], ignore_index=True)
    return model, records, sum(p[2] for p in parts), sum(p[3] for p in parts)


def _backtest_cached(
    frame: pd.DataFrame, model: str, windows: int, path: Path, frozen: bool = False
) -> tuple[str, pd.DataFrame, float, int]:
    if path.is_file():
        records, seconds, fits = pickle.loads(path.read_bytes())
        return model, records, seconds, fits
    models = {model: forecasters.create(model)}
    if frozen:  # trained once at the oldest origin, every newer one forecast by update (as auto's backtest)
        models = train_once(models, regularize(frame), horizon=H, windows=windows, step=STEP)
    result = run_backtest(frame, models, horizon=H, windows=windows, step=STEP, level=LEVELS, min_train=240)
    fits = 1 if frozen else int(result.records["window"].nunique())
    out = (result.records, result.seconds[model], fits)
    path.write_bytes(pickle.dumps(out))
    return model, *out


def cube(records: pd.DataFrame, models: list[str], windows: int) -> dict[str, dict[str, Any]]:
    """Per series: arrays (model, window, lead) of mean and bands, and (window, lead) actuals; NaN = none."""
    out: dict[str, dict[str, Any]] = {}
    mi = {m: i for i, m in enumerate(models)}
    for sid, g in records.groupby("series_id", sort=True):
        shape = (len(models), windows, H)
        c: dict[str, Any] = {"mean": np.full(shape, np.nan), "actual": np.full((windows, H), np.nan)}
        for lvl in LEVELS:
            c[f"lo-{lvl}"], c[f"hi-{lvl}"] = np.full(shape, np.nan), np.full(shape, np.nan)
        m = g["model"].map(mi).to_numpy()
        w = g["window"].to_numpy(int)
        k = g["lead"].to_numpy(int) - 1
        for col in ("mean", *(f"{s}-{lvl}" for lvl in LEVELS for s in ("lo", "hi"))):
            c[col][m, w, k] = g[col].to_numpy(float)
        c["actual"][w, k] = g["actual"].to_numpy(float)
        out[str(sid)] = c
    return out


def strengths(frame: pd.DataFrame, outer: int) -> dict[tuple[str, int], float]:
    """Per (series, scored origin): the daily cycle's strength over the 14 days before it, as auto's gate
    measures it (``models.forecast.gate.seasonal_ids``; NaN with less history: the plain pool)."""
    out = {}
    for sid, g in frame.groupby("series_id"):
        v = g.sort_values("timestamp")["value"].to_numpy(float)
        for o in range(outer):
            cut = v[: v.size - H - o * STEP]
            out[str(sid), o] = daily_strength(cut, 24, GATE_DAYS) if cut.size >= GATE_DAYS * 24 else float("nan")
    return out


def replay(
    cubes: dict[str, dict[str, Any]],
    models: list[str],
    outer: int,
    every_rule: SelectionRule,
    candidates: tuple[str, ...],
    fresh: bool = False,
    strength: dict[tuple[str, int], float] | None = None,
) -> dict[str, Any]:
    """``auto``'s forecasts at outer windows 0..outer-1: mean, raw bands, CQR scores, choices."""
    cand = [models.index(m) for m in candidates if m in models]
    out: dict[str, Any] = {
        "mean": [],
        "actual": [],
        "bands": {lvl: [] for lvl in LEVELS},
        "scores": {lvl: [] for lvl in LEVELS},
        "rows": {lvl: [] for lvl in LEVELS},  # daily windows' scores, newest known first (--calibration)
        "members": [],  # --calibration fresh: per forecast, member → (weight, bands at o, own scores) per level
        "choice": [],
        "key": [],
        "scale": [],
    }
    for sid, c in cubes.items():
        windows = c["actual"].shape[0]
        for o in range(outer):
            if not np.isfinite(c["actual"][o]).any():
                continue
            rule = every_rule.for_strength(strength.get((sid, o), np.nan) if strength else np.nan)
            inner = [o + INNER_STEP // STEP * j for j in range(1, INNER + 1) if o + INNER_STEP // STEP * j < windows]
            inner = [w for w in inner if np.isfinite(c["actual"][w]).any()]
            usable = [
                i
                for i in cand
                if np.isfinite(c["mean"][i, o]).all()
                and (rule.margin >= 1 or all(np.isfinite(c["mean"][i, w]).all() for w in inner))
            ]
            if not usable:
                continue
            preds = {models[i]: c["mean"][i, inner] for i in usable}
            actual_in = c["actual"][inner] if inner else np.zeros((0, H))
            label, weights = choose(preds, actual_in, rule)
            idx = {m: models.index(m) for m in weights}
            out["mean"].append(sum(wt * c["mean"][idx[m], o] for m, wt in weights.items()))
            out["actual"].append(c["actual"][o])
            out["choice"].append(label)
            out["key"].append((sid, o))
            served_in = sum(wt * c["mean"][idx[m], inner] for m, wt in weights.items()) if inner else None
            out["scale"].append(float(np.nanmean(np.abs(actual_in - served_in))) if inner else np.nan)
            if fresh:
                out["members"].append(_member_evidence(c, models, o, inner, weights))
            for lvl in LEVELS:
                lo = sum(wt * c[f"lo-{lvl}"][idx[m], o] for m, wt in weights.items())
                hi = sum(wt * c[f"hi-{lvl}"][idx[m], o] for m, wt in weights.items())
                out["bands"][lvl].append((lo, hi))
                if inner:
                    lo_in = sum(wt * c[f"lo-{lvl}"][idx[m], inner] for m, wt in weights.items())
                    hi_in = sum(wt * c[f"hi-{lvl}"][idx[m], inner] for m, wt in weights.items())
                    s = np.maximum(lo_in - actual_in, actual_in - hi_in).ravel()
                else:
                    s = np.zeros(0)
                out["scores"][lvl].append(s)
                rows = list(range(o + GAP, windows))  # every window whose actuals all precede origin o
                a = c["actual"][rows]
                lo_r = sum(wt * c[f"lo-{lvl}"][idx[m], rows] for m, wt in weights.items())
                hi_r = sum(wt * c[f"hi-{lvl}"][idx[m], rows] for m, wt in weights.items())
                out["rows"][lvl].append(np.maximum(lo_r - a, a - hi_r))
    return out


def _member_evidence(
    c: dict[str, Any], models: list[str], o: int, inner: list[int], weights: dict[str, float]
) -> dict[str, tuple[Any, ...]]:
    """Per member of what auto serves at origin ``o``: its weight, its bands there, its own CQR scores (a
    baseline's on every inner window, the LSTM's on the newest only, forecast by a network trained there:
    ``lstm_fresh``'s records; ``models.forecast.memberwise``) and, for the LSTM, the mean half-width per level
    of the band those scores were measured against, per lead (None for a baseline)."""
    out = {}
    for m, wt in weights.items():
        i = models.index(m)
        src, rows = (models.index(FRESH), inner[:1]) if m == "lstm" else (i, inner)
        a = c["actual"][rows]
        out[m] = (
            wt,
            {lvl: (c[f"lo-{lvl}"][i, o], c[f"hi-{lvl}"][i, o]) for lvl in LEVELS},
            {lvl: np.maximum(c[f"lo-{lvl}"][src, rows] - a, a - c[f"hi-{lvl}"][src, rows]).ravel() for lvl in LEVELS},
            # the calibrating window's mean half-width: the LSTM's misses are learnt in units of its band
            {lvl: np.nanmean(c[f"hi-{lvl}"][src, rows] - c[f"lo-{lvl}"][src, rows], axis=0) / 2 for lvl in LEVELS}
            if m == "lstm"
            else None,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--traces", default="philly,alibaba,sim,sim2,sim3")
    parser.add_argument("--models", default=",".join((*BASELINES, "lstm", *GLOBAL)))
    parser.add_argument("--outer", type=int, default=28, help="scored origins per trace (at most)")
    parser.add_argument("--quick", action="store_true", help="no mstl/lstm, 8 scored origins")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--slow-inner",
        type=int,
        default=0,
        help="also backtest mstl/lstm at the inner origins of the first N scored ones",
    )
    parser.add_argument(
        "--frozen",
        action="store_true",
        help="mstl/lstm at the inner origins from one network frozen at the oldest (as auto's backtest)",
    )
    parser.add_argument(
        "--calibration",
        choices=("weekly", "daily", "self", "fresh", "fresh-abs"),
        default="weekly",
        help="auto's intervals: CQR on its weekly inner windows (an earlier design), on 7 daily ones, "
        "daily with the fit's self-tuned multiplier (then no gamma is tuned across traces), per member as auto "
        "serves them (fresh), or so with the LSTM's shift in GPUs (fresh-abs, an earlier design)",
    )
    parser.add_argument("--cache", type=Path, default=Path("/tmp/bench-forecast-cache"))
    args = parser.parse_args(argv)
    if args.frozen:
        args.slow_inner = FROZEN
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if args.quick:
        models = [m for m in models if m not in ("mstl", "lstm", *GLOBAL)]
        args.outer = min(args.outer, 8)
    digest = claim_cache(args.cache)  # records of other code are refused, never mixed in
    print(f"cache: {args.cache} (code digest {digest})")
    traces = load_traces(args.data, args.traces.split(","))
    windows = args.outer + INNER * INNER_STEP // STEP
    started = time.perf_counter()
    jobs: list[tuple[Any, ...]] = [
        (t, f, m, windows, args.cache, args.slow_inner) for t, f in traces.items() for m in models if m not in GLOBAL
    ]
    # lstm_global: one network per held-out trace, trained on the other traces (bench.forecast_global)
    gjobs = global_jobs(traces, windows, args.cache, H, STEP, LEVELS) if any(m in GLOBAL for m in models) else []
    with ProcessPoolExecutor(args.jobs) as pool:
        done = list(pool.map(backtest_global, gjobs)) + list(pool.map(_backtest_one, jobs))
    jobs = [*gjobs, *jobs]
    per_trace: dict[str, Any] = {}
    for (trace, frame, *_), (model, records, seconds, fits) in zip(jobs, done, strict=True):
        entry = per_trace.setdefault(trace, {"frame": frame, "records": [], "seconds": {}})
        entry["records"].append(records)
        entry["seconds"][model] = seconds / max(fits, 1)
    fresh = args.calibration in ("fresh", "fresh-abs")
    if fresh:  # the LSTM's calibration window: a network trained at each origin up to the newest inner one
        for trace, entry in per_trace.items():
            w = args.outer + INNER_STEP // STEP
            rec = _backtest_cached(entry["frame"], "lstm", w, args.cache / f"{trace}-lstm-w{w}.pkl")[1]
            entry["records"].append(rec.assign(model=FRESH))
        models = [*models, FRESH]
    for entry in per_trace.values():
        records = pd.concat(entry["records"], ignore_index=True)
        w = int(records["window"].max()) + 1
        entry["cubes"] = cube(records, models, w)
        entry["outer"] = min(args.outer, max(1, w - INNER_STEP // STEP))

    # with --slow-inner ≥ --outer the slow models have records at every inner origin: full candidates
    full = args.slow_inner >= args.outer
    candidates = tuple(m for m in models if (m not in SLOW or full) and m != FRESH)
    grid = [*POOLS.values(), *(FIXED_POOLS if full else ())]
    rules = [
        SelectionRule(pool=p, margin=mg, loss=ls, min_windows=mw)
        for p, mg, ls, mw in itertools.product(grid, MARGINS, ("mae", "median"), (1, 2))
        if all(m in models for m in p) and (full or not any(m in SLOW for m in p))
    ]
    weighted = [(p, w) for p, w in WEIGHTED if all(m in models for m in p)]
    rules += [SelectionRule(pool=p, weights=w, margin=1.0) for p, w in weighted]
    if full:
        rules += [SelectionRule(pool=p, weights=w, margin=mg) for p, w in weighted for mg in (0.05, 0.1)]
    else:  # pools with a slow member can only be scored as fixed pools
        rules += [SelectionRule(pool=p, margin=1.0, min_windows=1) for p in FIXED_POOLS if all(m in models for m in p)]
    plain = SelectionRule(pool=DEFAULT_RULE.pool, weights=DEFAULT_RULE.weights)
    rules += [
        replace(plain, seasonal_pool=p, seasonal_weights=w, seasonal_from=t)
        for (p, w), t in itertools.product(SEASONAL_POOLS, SEASONAL_FROM)
        if all(m in models for m in (*plain.pool, *p))
    ]
    if not rules:
        raise SystemExit(
            f"bench.forecast: --models {args.models} holds no whole pool for auto to choose from "
            "(the smallest: seasonal_median_24,window_mean_168; every pool is in POOLS)"
        )
    results: dict[str, dict[SelectionRule, Any]] = {t: {} for t in per_trace}
    for trace, entry in per_trace.items():
        gate = strengths(entry["frame"], entry["outer"])
        base = replay(entry["cubes"], models, entry["outer"], rules[0], candidates)
        entry["keys"] = base["key"]
        entry["scales"] = mase_scales(entry["cubes"], entry["frame"], base["key"])
        entry["rows"] = model_rows(entry["cubes"], [m for m in models if m != FRESH], base["key"], entry["scales"])
        entry["best_base"] = min((r["mae"], m) for m, r in entry["rows"].items() if m in BASELINES)
        for rule in rules:
            fixed = any(m in SLOW for m in rule.pool) and not full
            members = (*rule.pool, *rule.seasonal_pool) if fixed else candidates
            rep = replay(entry["cubes"], models, entry["outer"], rule, members, fresh, gate)
            assert rep["key"] == entry["keys"]
            results[trace][rule] = rep
    wall = time.perf_counter() - started
    return report(per_trace, results, rules, candidates, wall, args.slow_inner, args.calibration)


if __name__ == "__main__":
    sys.exit(main())
