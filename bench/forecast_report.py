"""``python -m bench.forecast``'s scoring and report: per-trace tables, the leave-one-trace-out headline, coverage.

Split from the benchmark run (backtests, cubes, ``auto``'s replay) so each stays one idea: this module only
reads what the run recorded. The constants below are the benchmark's shape, shared by the run and its
report: horizon ``H``, a new origin every ``STEP`` hours, ``auto``'s ``INNER`` backtest windows a week
(``INNER_STEP``) apart, the scored interval ``LEVELS``, the models too slow to backtest at every inner origin
(``SLOW``) and the interval multipliers tuned across traces (``GAMMAS``, > 1 narrows).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from bench.forecast_intervals import calibrated, fit_gammas
from models.forecast.selection import DEFAULT_RULE, SelectionRule

__all__ = [
    "GAMMAS",
    "INNER",
    "INNER_STEP",
    "LEVELS",
    "SLOW",
    "STEP",
    "H",
    "coverage_by_series",
    "mase_scales",
    "model_rows",
    "report",
    "score",
    "series_bootstrap",
]

H, STEP, INNER_STEP, INNER = 168, 24, 168, 3
LEVELS = (80, 95)
# Fits too slow on 2 shared cores to backtest at every inner origin: scored at the outer ones only.
SLOW = ("mstl", "lstm")
GAMMAS = (2.0, 1.5, 1.25, 1.0, 0.8, 0.65, 0.5, 0.4, 0.3)  # > 1 narrows, < 1 widens


def score(
    mean: np.ndarray, actual: np.ndarray, scales: np.ndarray, bands: dict[int, tuple[np.ndarray, np.ndarray]] | None
) -> dict[str, float]:
    """mean/actual: (forecasts, H). MAE pooled over points; MASE averaged over forecasts."""
    ok = np.isfinite(actual) & np.isfinite(mean)
    err = np.where(ok, np.abs(actual - mean), np.nan)
    per = np.nanmean(err, axis=1)
    row = {"mae": float(np.nanmean(err)), "mase": float(np.nanmean(per / scales))}
    if bands:
        hi80 = bands[80][1]
        diff = actual - hi80
        row["pinball_p90"] = float(np.nanmean(np.where(ok, np.maximum(0.9 * diff, -0.1 * diff), np.nan)))
        for lvl, (lo, hi) in bands.items():
            row[f"cov{lvl}"] = float(np.mean(((actual >= lo) & (actual <= hi))[ok]))
    return row


def coverage_by_series(
    keys: list[tuple[str, int]], actual: np.ndarray, lo: np.ndarray, hi: np.ndarray, mean: np.ndarray | None = None
) -> np.ndarray:
    """Per series (rows in first-seen order): [points inside the band, points scored], over all its origins. A
    point is scored where the actual (and, given ``mean``, the forecast) is finite, as ``score`` counts it."""
    counts: dict[str, list[int]] = {}
    means = np.full(np.shape(actual), 0.0) if mean is None else mean
    for (sid, _), a, low, high, m in zip(keys, actual, lo, hi, means, strict=True):
        ok = np.isfinite(a) & np.isfinite(m)
        c = counts.setdefault(sid, [0, 0])
        c[0] += int(((a >= low) & (a <= high))[ok].sum())
        c[1] += int(ok.sum())
    return np.array(list(counts.values()), dtype=float).reshape(-1, 2)


def series_bootstrap(counts: np.ndarray, draws: int = 2000, seed: int = 0) -> float:
    """Standard error of a pooled coverage, resampling whole series: a series' hours and origins are
    correlated, so the series, not the point, is the unit of evidence. ``counts``: rows of [inside, scored];
    series with nothing scored are left out, and 0 is returned with fewer than two left."""
    counts = np.asarray(counts, dtype=float)
    if counts.ndim != 2 or counts.shape[1] != 2:
        raise ValueError(f"counts must be rows of [inside, scored], got shape {counts.shape}")
    if draws < 1:
        raise ValueError(f"draws must be at least 1, got {draws}")
    counts = counts[counts[:, 1] > 0]
    if counts.shape[0] < 2:
        return 0.0
    idx = np.random.default_rng(seed).integers(0, counts.shape[0], (draws, counts.shape[0]))
    picked = counts[idx]  # (draws, series, 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        cov = picked[..., 0].sum(axis=1) / picked[..., 1].sum(axis=1)
    return float(np.nanstd(cov))


def mase_scales(cubes: dict[str, dict[str, Any]], frame: pd.DataFrame, keys: list[tuple[str, int]]) -> np.ndarray:
    """In-sample seasonal-naive-168 MAE before each origin (the MASE denominator)."""
    series = {sid: g.sort_values("timestamp")["value"].to_numpy(float) for sid, g in frame.groupby("series_id")}
    out = []
    for sid, o in keys:
        v = series[sid][: len(series[sid]) - H - o * STEP]
        m = 168 if v.size > 336 else 24
        out.append(float(np.mean(np.abs(v[m:] - v[:-m]))) or np.nan)
    return np.array(out)


def model_rows(
    cubes: dict[str, dict[str, Any]], models: list[str], keys: list[tuple[str, int]], scales: np.ndarray
) -> dict[str, dict[str, float]]:
    rows = {}
    for i, m in enumerate(models):
        mean = np.array([cubes[s]["mean"][i, o] for s, o in keys])
        actual = np.array([cubes[s]["actual"][o] for s, o in keys])
        bands = {
            lvl: (
                np.array([cubes[s][f"lo-{lvl}"][i, o] for s, o in keys]),
                np.array([cubes[s][f"hi-{lvl}"][i, o] for s, o in keys]),
            )
            for lvl in LEVELS
        }
        if np.isfinite(mean).any():
            rows[m] = score(mean, actual, scales, bands)
    return rows


def report(
    per_trace: dict[str, Any],
    results: dict[str, dict[SelectionRule, Any]],
    rules: list[SelectionRule],
    candidates: tuple[str, ...],
    wall: float,
    slow_inner: int = 0,
    how: str = "weekly",
) -> int:
    def ratio(trace: str, rule: SelectionRule) -> float:
        e, rep = per_trace[trace], results[trace][rule]
        mae = score(np.array(rep["mean"]), np.array(rep["actual"]), e["scales"], None)["mae"]
        return mae / e["best_base"][0]

    def evidenced(trace: str, rule: SelectionRule, gamma: float) -> tuple[np.ndarray, Any, dict[int, Any]]:
        """The forecasts where auto had backtest evidence for its bands (for a pool with a slow member: only
        the first ``slow_inner`` origins): which rows, and their means and served bands."""
        rep = results[trace][rule]
        keep = np.ones(len(rep["key"]), bool)
        if slow_inner > 0 and any(m in SLOW for m in rule.pool):
            keep = np.array([o < slow_inner for _, o in rep["key"]])
        bands = {lvl: (lo[keep], hi[keep]) for lvl, (lo, hi) in calibrated(rep, gamma, how).items()}
        return keep, np.array(rep["mean"])[keep], bands

    def calibration(trace: str, rule: SelectionRule, gamma: float) -> dict[str, float]:
        """Coverage where auto had backtest evidence for its bands (``evidenced``)."""
        keep, mean, bands = evidenced(trace, rule, gamma)
        out = score(mean, np.array(results[trace][rule]["actual"])[keep], per_trace[trace]["scales"][keep], bands)
        out["n"] = float(keep.sum())
        return out

    def series_counts(trace: str, rule: SelectionRule, gamma: float) -> dict[int, np.ndarray]:
        """Per level, ``coverage_by_series`` over the same forecasts ``calibration`` scores."""
        keep, mean, bands = evidenced(trace, rule, gamma)
        rep = results[trace][rule]
        keys = [k for k, kept in zip(rep["key"], keep, strict=True) if kept]
        actual = np.array(rep["actual"])[keep]
        return {lvl: coverage_by_series(keys, actual, lo, hi, mean) for lvl, (lo, hi) in bands.items()}

    def cov_error(trace: str, rule: SelectionRule, gamma: float) -> float:
        s = calibration(trace, rule, gamma)
        return abs(s["cov80"] - 0.8) + abs(s["cov95"] - 0.95)

    traces = list(per_trace)
    headline, held_cov = [], []
    held_counts: dict[int, list[np.ndarray]] = {lvl: [] for lvl in LEVELS}
    # nothing about the intervals tuned across traces
    gammas = (1.0,) if how in ("self", "fresh", "fresh-abs") else GAMMAS
    for held in traces:
        train = [t for t in traces if t != held] or [held]
        rule = min(rules, key=lambda r: max(ratio(t, r) for t in train))  # worst case first, as the headline
        gamma = min(gammas, key=lambda g: float(np.mean([cov_error(t, rule, g) for t in train])))
        e, rep = per_trace[held], results[held][rule]
        row = score(np.array(rep["mean"]), np.array(rep["actual"]), e["scales"], calibrated(rep, gamma, how))
        fitted = rule.pool if rule.margin >= 1 else candidates
        row["sec/fit"] = sum(e["seconds"][m] for m in fitted) * (INNER + 1)
        e["rows"]["auto"] = row
        r = row["mae"] / e["best_base"][0]
        headline.append((r, held))
        choices = pd.Series(rep["choice"]).value_counts().head(4).to_dict()
        cal = calibration(held, rule, gamma)
        print(
            f"\n## {held}: {e['frame']['series_id'].nunique()} series, {len(rep['key'])} forecasts "
            f"(origins every {STEP} h, h={H}); auto tuned on {', '.join(train)}: pool={rule.pool} "
            f"weights={rule.weights} margin={rule.margin} loss={rule.loss} min_windows={rule.min_windows} gamma={gamma}"
            + (f" seasonal={_describe(rule)}" if rule.seasonal_pool else "")
        )
        table = pd.DataFrame(e["rows"]).T
        for m, sec in e["seconds"].items():
            table.loc[m, "sec/fit"] = sec
        table["mae/best_base"] = table["mae"] / e["best_base"][0]
        print(table.sort_values("mae").to_string(float_format=lambda v: f"{v:.3f}"))
        print(
            f"best baseline: {e['best_base'][1]} (MAE {e['best_base'][0]:.3f}); auto {r:.3f} of it "
            f"({100 * (1 - r):+.1f} %); auto served: {choices}"
        )
        print(
            f"auto intervals where calibrated on its own backtest ({int(cal['n'])} forecasts): "
            f"coverage 80 % {cal['cov80']:.3f}, 95 % {cal['cov95']:.3f}"
        )
        own = fit_gammas(rep, how)
        counts = series_counts(held, rule, gamma)
        for lvl in LEVELS:
            held_counts[lvl].append(counts[lvl])
        se = {lvl: series_bootstrap(counts[lvl]) for lvl in LEVELS}
        held_cov.append(
            f"{held} {cal['cov80']:.3f} ± {se[80]:.3f} / {cal['cov95']:.3f} ± {se[95]:.3f}"
            + "".join(
                f"; {lvl} % self-tuned gamma {min(v)}-{max(v)}"
                for lvl in LEVELS
                if (v := [round(g, 2) for (lv, _), g in sorted(own.items()) if lv == lvl])
            )
        )
    worst = max(headline)
    print(
        f"\n# leave-one-trace-out headline: worst held-out trace {worst[1]}: auto MAE = {worst[0]:.3f} × best "
        f"baseline ({100 * (1 - worst[0]):+.1f} %); all: " + ", ".join(f"{t} {r:.3f}" for r, t in headline)
    )
    print(f"# held-out coverage 80 % / 95 % ± series-bootstrap s.e. ({how} calibration): " + ", ".join(held_cov))
    pooled = {lvl: np.concatenate(held_counts[lvl]) for lvl in LEVELS}
    print(
        f"# held-out coverage pooled over {int((pooled[80][:, 1] > 0).sum())} series of every trace: "
        + " / ".join(
            f"{lvl} % {pooled[lvl][:, 0].sum() / pooled[lvl][:, 1].sum():.3f} ± {series_bootstrap(pooled[lvl]):.3f}"
            for lvl in LEVELS
        )
    )
    everywhere = min(rules, key=lambda r: max(ratio(t, r) for t in traces))
    gamma = min(gammas, key=lambda g: float(np.mean([cov_error(t, everywhere, g) for t in traces])))
    print(f"# rule tuned on all traces: {replace(everywhere)} gamma={gamma}")
    plain = SelectionRule(pool=DEFAULT_RULE.pool, weights=DEFAULT_RULE.weights)
    for label, rule in (
        ("shipped pool without the seasonal pool", plain),
        ("shipped default", DEFAULT_RULE),
        ("tuned on all traces", everywhere),
    ):
        if rule not in results[traces[0]]:
            continue
        cells = [
            f"{t} {ratio(t, rule):.3f} ({c['cov80']:.3f} / {c['cov95']:.3f})"
            for t in traces
            if (c := calibration(t, rule, 1.0))
        ]
        print(f"# {label} {_describe(rule)}: MAE ÷ best baseline (80 % / 95 %, gamma 1): " + ", ".join(cells))
    print(f"wall time: {wall:.1f} s")
    return 0


def _describe(rule: SelectionRule) -> str:
    """``{lstm: 0.8, ...}`` (or the pool auto chooses from, for a rule without weights), and the seasonal pool
    with its threshold where the rule has one."""
    text = str(dict(zip(rule.pool, rule.weights, strict=True))) if rule.weights else f"choice among {rule.pool}"
    if rule.seasonal_pool:
        seasonal = dict(zip(rule.seasonal_pool, rule.seasonal_weights, strict=True))
        text += f", {seasonal} where the daily cycle's strength ≥ {rule.seasonal_from}"
    return text
