"""Window-average baselines: the mean of the last day or week, and the same hour averaged over recent days.

Why they exist: on real GPU-cluster traces demand wanders (level shifts, drains, slow trends) far more
than it cycles, and a plain mean of the last week is one of the hardest forecasts to beat a week ahead
(measured on an unseen public trace: 40.2 GPUs MAE against 41.0 for the old ``auto``). Averaging damps
the noise of the last hour that ``naive`` carries into all 168 leads; the seasonal window keeps the daily
rhythm that ``seasonal_naive_24`` copies from a single, noisy day. Intervals are the series' own k-step
errors replayed from every past origin (``empirical_bands``), like the other baselines. No fitted
parameters either: ``update`` recomputes the means and bands from the new window.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from models.forecast.base import LocalForecaster, PointForecast
from models.forecast.baselines import empirical_bands
from models.forecast.prep import ForecastInputError, RegularSeries
from models.forecast.registry import forecasters

__all__ = ["SeasonalWindowForecaster", "WindowMeanForecaster"]


def _trailing_means(values: np.ndarray, window: int) -> np.ndarray:
    """``out[t]`` = mean of ``values[max(0, t-window+1) : t+1]`` for every t."""
    cum = np.concatenate([[0.0], np.cumsum(values)])
    t = np.arange(values.shape[0])
    lo = np.maximum(0, t - window + 1)
    return np.asarray((cum[t + 1] - cum[lo]) / (t + 1 - lo))


@forecasters.register("window_mean_24", window=24)
@forecasters.register("window_mean_168", window=168)
class WindowMeanForecaster(LocalForecaster):
    """A flat forecast at the mean of the last ``window`` steps (24: last day, 168: last week)."""

    min_length: ClassVar[int] = 2

    def __init__(self, window: int = 168, freq: str = "1h") -> None:
        self.window = window
        self.freq = freq

    def _fit_one(self, series: RegularSeries) -> Any:
        return series

    def _predict_one(self, state: Any, horizon: int, levels: tuple[int, ...]) -> PointForecast:
        s: RegularSeries = state
        w = int(self.window)
        means = _trailing_means(s.values, w)
        mean = np.full(horizon, means[-1])

        def point(values: np.ndarray, origins: np.ndarray, k: int) -> np.ndarray:
            return np.asarray(means[origins])

        # errors only from origins with a full window behind them, when the history has any
        first = w - 1 if len(s) > w + 24 else 0
        return mean, empirical_bands(mean, s.values, s.observed, point, first, levels)


@forecasters.register("seasonal_mean_24", season=24, cycles=7)
@forecasters.register("seasonal_median_24", season=24, cycles=7, statistic="median")
class SeasonalWindowForecaster(LocalForecaster):
    """Each hour of the day forecast as the mean (or median) of that hour over the last ``cycles`` days.

    With less than ``cycles`` full seasons of history it averages the seasons there are. The median
    (``seasonal_median_24``) is the rule a platform engineer writes when drains and outages are in the
    history: a drain of a few hours to a day moves one or two of the seven values an hour's median is
    taken over, not the forecast. On the simulated traces of ``bench/forecast.py`` (drains every ~500
    hours) it beat every other baseline; on Philly and Alibaba, whose demand wanders more than it drains,
    it did not (docs/design.md, "Forecasting").
    """

    min_length: ClassVar[int] = 2

    def __init__(self, season: int = 24, cycles: int = 7, statistic: str = "mean", freq: str = "1h") -> None:
        self.season = season
        self.cycles = cycles
        self.statistic = statistic
        self.freq = freq

    def min_history(self) -> int:
        return int(self.season)

    def _fit_one(self, series: RegularSeries) -> Any:
        if self.statistic not in ("mean", "median"):
            raise ForecastInputError(f"seasonal window statistic must be 'mean' or 'median', not {self.statistic!r}")
        return series

    def _predict_one(self, state: Any, horizon: int, levels: tuple[int, ...]) -> PointForecast:
        s: RegularSeries = state
        m, c = int(self.season), int(self.cycles)
        n = len(s)
        used = max(1, min(c, n // m))
        reduce = np.median if self.statistic == "median" else np.mean
        profile = reduce(s.values[n - used * m :].reshape(used, m), axis=0)
        mean = profile[np.arange(horizon) % m]

        def point(values: np.ndarray, origins: np.ndarray, k: int) -> np.ndarray:
            base = origins - m + 1 + (k - 1) % m
            return np.asarray(reduce(np.stack([values[base - j * m] for j in range(used)]), axis=0))

        return mean, empirical_bands(mean, s.values, s.observed, point, used * m - 1, levels)
