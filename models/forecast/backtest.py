"""Rolling-origin backtests: the only evidence ``auto``, the registry and the benchmark trust.

Window ``k`` (0 = most recent) cuts each series at ``last - (h + k·step)`` steps: the model is refitted
on what precedes the cut (a fresh ``clone``, so no state leaks between windows) and forecasts ``h`` steps;
actuals are the *observed* rows after the cut — hours missing from the input stay NaN and are not scored.
Cutting relative to each series' own end lets series that stop at different times share a backtest.
A model that cannot use a series at some window (too short) is skipped there, and the skip is recorded.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.base import clone

from models.forecast.base import BaseForecaster
from models.forecast.metrics import coverage, mae, mase_scale, pinball, smape
from models.forecast.prep import RegularSeries, check_levels, parse_freq, regularize, to_frame
from models.frames import ID, TIME

__all__ = ["BacktestResult", "run_backtest", "score_records", "summarize"]

RECORD_KEYS = ("model", "window", ID)


@dataclass
class BacktestResult:
    """Forecasts with actuals (``records``), MASE scales per (series, window), and what was skipped."""

    records: pd.DataFrame
    scales: dict[tuple[str, int], float]
    levels: tuple[int, ...]
    horizon: int
    seconds: dict[str, float] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    def metrics(self) -> pd.DataFrame:
        return score_records(self.records, self.scales, self.levels)


def _truncate(series: RegularSeries, keep: int) -> RegularSeries:
    return RegularSeries(series.series_id, series.start, series.freq, series.values[:keep], series.observed[:keep])


def window_cut(series: RegularSeries, horizon: int, step: int, window: int) -> int:
    """Number of grid steps kept for training at ``window``."""
    return len(series) - horizon - window * step


def run_backtest(
    frame: pd.DataFrame,
    models: Mapping[str, BaseForecaster],
    *,
    horizon: int = 168,
    windows: int = 4,
    step: int = 168,
    level: Iterable[float] = (80, 95),
    freq: str = "1h",
    min_train: int = 24,
) -> BacktestResult:
    """Backtest every model over ``windows`` origins; ``min_train`` is the least history any fit gets."""
    levels = check_levels(level)
    parse_freq(freq)
    series = regularize(frame, freq)
    records: list[pd.DataFrame] = []
    scales: dict[tuple[str, int], float] = {}
    seconds: dict[str, float] = dict.fromkeys(models, 0.0)
    skipped: list[str] = []
    for window in range(windows):
        cuts = {s.series_id: window_cut(s, horizon, step, window) for s in series}
        alive = [s for s in series if cuts[s.series_id] >= max(min_train, 2)]
        if not alive:
            skipped.append(f"window {window}: no series has {min_train} steps of history before its cut")
            continue
        actual_parts = []
        for s in alive:
            cut = cuts[s.series_id]
            scales[(s.series_id, window)] = mase_scale(s.values[:cut], s.observed[:cut])
            idx = s.index()[cut : cut + horizon]
            vals = np.where(s.observed[cut : cut + horizon], s.values[cut : cut + horizon], np.nan)
            actual_parts.append(pd.DataFrame({ID: s.series_id, TIME: idx, "actual": vals}))
        actuals = pd.concat(actual_parts, ignore_index=True)
        for name, model in models.items():
            eligible = [s for s in alive if cuts[s.series_id] >= model.min_history()]
            for s in alive:
                if s not in eligible:
                    skipped.append(f"{name}: series {s.series_id!r} too short at window {window}")
            if not eligible:
                continue
            train = to_frame([_truncate(s, cuts[s.series_id]) for s in eligible])
            started = time.perf_counter()
            try:
                forecast = clone(model).fit(train).predict(horizon, level=levels)
            except ValueError as exc:
                skipped.append(f"{name}: window {window} failed: {exc}".splitlines()[0])
                continue
            finally:
                seconds[name] += time.perf_counter() - started
            forecast["lead"] = forecast.groupby(ID).cumcount() + 1
            merged = forecast.merge(actuals, on=[ID, TIME], how="left")
            merged.insert(0, "window", window)
            merged.insert(0, "model", name)
            records.append(merged)
    if not records:
        raise ValueError("backtest produced no forecasts: every series is too short for every model")
    return BacktestResult(
        records=pd.concat(records, ignore_index=True),
        scales=scales,
        levels=levels,
        horizon=horizon,
        seconds=seconds,
        skipped=skipped,
    )


def score_records(
    records: pd.DataFrame, scales: Mapping[tuple[str, int], float], levels: tuple[int, ...]
) -> pd.DataFrame:
    """Metrics per (model, window, series); NaN actuals are ignored by every metric."""
    rows = []
    for (model, window, series_id), g in records.groupby(list(RECORD_KEYS), sort=True):
        actual = g["actual"].to_numpy(float)
        mean = g["mean"].to_numpy(float)
        err = mae(actual, mean)
        window = int(str(window))
        scale = scales.get((str(series_id), window), float("nan"))
        row: dict[str, object] = {
            "model": model,
            "window": window,
            ID: series_id,
            "n": int(np.isfinite(actual).sum()),
            "mae": err,
            "mase": err / scale if np.isfinite(scale) and scale > 0 else float("nan"),
            "smape": smape(actual, mean),
            "pinball_p50": pinball(actual, mean, 0.5),
        }
        if 80 in levels:
            row["pinball_p90"] = pinball(actual, g["hi-80"].to_numpy(float), 0.9)
        for lvl in levels:
            row[f"coverage_{lvl}"] = coverage(actual, g[f"lo-{lvl}"].to_numpy(float), g[f"hi-{lvl}"].to_numpy(float))
        rows.append(row)
    return pd.DataFrame(rows)


def summarize(metrics: pd.DataFrame, by: Iterable[str] = ("model", ID)) -> pd.DataFrame:
    """Average per-window metrics (coverage weighted by the number of scored points)."""
    keys = list(by)
    value_cols = [c for c in metrics.columns if c not in (*RECORD_KEYS, "n")]
    cov_cols = [c for c in value_cols if c.startswith("coverage_")]
    plain = [c for c in value_cols if c not in cov_cols]
    work = metrics.copy()
    for c in cov_cols:
        scored = work[c].notna()
        work[f"_hits_{c}"] = np.where(scored, work[c].fillna(0) * work["n"], 0.0)
        work[f"_n_{c}"] = np.where(scored, work["n"], 0)
    grouped = work.groupby(keys, sort=True)
    out = grouped[plain].mean()
    for c in cov_cols:
        hits, count = grouped[f"_hits_{c}"].sum(), grouped[f"_n_{c}"].sum()
        out[c] = (hits / count.where(count > 0)).astype(float)
    out["windows"] = grouped.size()
    return out.reset_index()
