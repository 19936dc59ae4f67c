"""Naive, drift and seasonal-naive forecasters: the baselines every other model has to beat.

Their intervals come from the series' own multi-step errors: for each lead k the method is replayed from
every past origin and the empirical quantiles of ``actual - forecast`` become the band at k. That is the
backtest-residual approach done exhaustively, so the bands are calibrated on the series' history (drains
and level shifts included) rather than assuming Gaussian one-step errors that grow like sqrt(k). Only
observed actuals count as errors; imputed hours never do.

They have no fitted parameters: their state is the history itself, so ``update`` (serving) recomputes the
point forecast and the bands from the new window (``LocalForecaster._update_one``'s default).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from models.forecast.base import Bands, LocalForecaster, PointForecast
from models.forecast.prep import RegularSeries
from models.forecast.registry import forecasters

__all__ = ["DriftForecaster", "NaiveForecaster", "SeasonalNaiveForecaster", "empirical_bands"]

# fewer errors than this at a lead and the band is extrapolated from the last well-sampled lead
_MIN_ERRORS = 24

# (values, origins t, lead k) -> point forecasts made at each origin for lead k
PointFn = Callable[[np.ndarray, np.ndarray, int], np.ndarray]


def _error_quantiles(
    values: np.ndarray, observed: np.ndarray, point: PointFn, first_origin: int, horizon: int, probs: np.ndarray
) -> np.ndarray:
    """``(horizon, len(probs))`` quantiles of k-step errors, k = 1..horizon."""
    n = values.shape[0]
    out = np.full((horizon, probs.shape[0]), np.nan)
    errors = np.full((horizon, max(n - first_origin, 1)), np.nan)  # row k-1: the k-step errors, NaN-padded
    counts = np.zeros(horizon, dtype=np.int64)
    for k in range(1, horizon + 1):
        origins = np.arange(first_origin, n - k)
        if origins.size:
            keep = observed[origins + k]
            origins = origins[keep]
        if origins.size >= _MIN_ERRORS:
            errors[k - 1, : origins.size] = values[origins + k] - point(values, origins, k)
            counts[k - 1] = origins.size
    good = np.flatnonzero(counts)
    if good.size:
        out[good] = _row_quantiles(errors[good], counts[good], probs)
        last_good = -1
        for k in range(1, horizon + 1):
            if counts[k - 1]:
                last_good = k - 1
            elif last_good >= 0:
                # Too few origins this far ahead (short history): widen the last reliable band like a
                # random walk would, which is what persistence errors do to first order.
                out[k - 1] = out[last_good] * np.sqrt(k / (last_good + 1))
    else:
        # Not even 24 one-step errors: fall back to the spread of the first differences around zero.
        diffs = np.diff(values) if n > 1 else np.zeros(1)
        scale = float(np.std(diffs)) if diffs.size else 0.0
        from scipy.stats import norm

        z = norm.ppf(probs)
        out = np.outer(np.sqrt(np.arange(1, horizon + 1)), z * scale)
    return out


def _row_quantiles(rows: np.ndarray, counts: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """``np.quantile(row[:count], probs)`` (linear method, bit for bit) for every NaN-padded row at once:
    one sort instead of a quantile call per lead, which made serving 1,000 queues take seconds."""
    ordered = np.sort(rows, axis=1)  # NaN padding sorts last
    virtual = (counts[:, None] - 1) * probs[None, :]
    below = np.floor(virtual)
    above = np.minimum(below + 1, counts[:, None] - 1)
    t = virtual - below
    a = np.take_along_axis(ordered, below.astype(np.int64), axis=1)
    b = np.take_along_axis(ordered, above.astype(np.int64), axis=1)
    diff = b - a
    result: np.ndarray = np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)  # numpy's _lerp: identical
    return result


def empirical_bands(
    mean: np.ndarray,
    values: np.ndarray,
    observed: np.ndarray,
    point: PointFn,
    first_origin: int,
    levels: tuple[int, ...],
) -> Bands:
    """Bands ``mean + q_{(1±L)/2}(errors at lead k)`` for each level L."""
    probs = np.array([p for lvl in levels for p in (0.5 - lvl / 200, 0.5 + lvl / 200)])
    q = _error_quantiles(values, observed, point, first_origin, mean.shape[0], probs)
    return {lvl: (mean + q[:, 2 * i], mean + q[:, 2 * i + 1]) for i, lvl in enumerate(levels)}


def _naive_point(values: np.ndarray, origins: np.ndarray, k: int) -> np.ndarray:
    return np.asarray(values[origins])


def _drift_point(values: np.ndarray, origins: np.ndarray, k: int) -> np.ndarray:
    slope = (values[origins] - values[0]) / np.maximum(origins, 1)
    return np.asarray(values[origins] + k * slope)


@forecasters.register("naive")
class NaiveForecaster(LocalForecaster):
    """Tomorrow looks like the last hour: strong on trending, level-shifting demand."""

    min_length: ClassVar[int] = 2

    def __init__(self, freq: str = "1h") -> None:
        self.freq = freq

    def _fit_one(self, series: RegularSeries) -> Any:
        return series

    def _predict_one(self, state: Any, horizon: int, levels: tuple[int, ...]) -> PointForecast:
        s: RegularSeries = state
        mean = np.full(horizon, s.values[-1])
        return mean, empirical_bands(mean, s.values, s.observed, _naive_point, 0, levels)


@forecasters.register("drift")
class DriftForecaster(LocalForecaster):
    """The last value plus the average change over the history."""

    min_length: ClassVar[int] = 3

    def __init__(self, freq: str = "1h") -> None:
        self.freq = freq

    def _fit_one(self, series: RegularSeries) -> Any:
        return series

    def _predict_one(self, state: Any, horizon: int, levels: tuple[int, ...]) -> PointForecast:
        s: RegularSeries = state
        n = len(s)
        slope = (s.values[-1] - s.values[0]) / (n - 1)
        mean = s.values[-1] + slope * np.arange(1, horizon + 1)
        return mean, empirical_bands(mean, s.values, s.observed, _drift_point, 1, levels)


@forecasters.register("seasonal_naive_24", season=24)
@forecasters.register("seasonal_naive_168", season=168)
class SeasonalNaiveForecaster(LocalForecaster):
    """The same hour of the last day (``season=24``) or week (``season=168``)."""

    def __init__(self, season: int = 168, freq: str = "1h") -> None:
        self.season = season
        self.freq = freq

    def min_history(self) -> int:
        return int(self.season)

    def _fit_one(self, series: RegularSeries) -> Any:
        return series

    def _predict_one(self, state: Any, horizon: int, levels: tuple[int, ...]) -> PointForecast:
        s: RegularSeries = state
        m = self.season
        last_cycle = s.values[-m:]
        mean = last_cycle[np.arange(horizon) % m]

        def point(values: np.ndarray, origins: np.ndarray, k: int) -> np.ndarray:
            return np.asarray(values[origins - m + 1 + (k - 1) % m])

        return mean, empirical_bands(mean, s.values, s.observed, point, m - 1, levels)


# The CLI's short name for the weekly seasonal naive: the same model, so a backtest of every forecaster runs it once.
forecasters.alias("seasonal_naive", "seasonal_naive_168")
