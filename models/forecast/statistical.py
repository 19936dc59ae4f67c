"""ETS and MSTL forecasters from statsmodels, behind the common contract.

ETS (additive error, damped additive trend) follows trend and level shifts without extrapolating them
forever; MSTL removes daily and weekly cycles first and runs the same ETS on what is left, which is how
the weak Philly seasonality is best used. Intervals are the models' own analytic ones; ``auto`` recalibrates
whatever it serves on backtest residuals. statsmodels warns freely (convergence, overflow in the likelihood
search on drained series); those warnings are expected on real data and are silenced around the fit only.
If a fit fails outright the series falls back to persistence, recorded in ``fallbacks_``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from models.forecast.base import Bands, LocalForecaster, PointForecast
from models.forecast.baselines import empirical_bands
from models.forecast.prep import RegularSeries
from models.forecast.registry import forecasters

__all__ = ["ETSForecaster", "MSTLForecaster"]


@dataclass
class _EtsState:
    result: Any | None  # statsmodels ETSResults, or None when the fit failed
    series: RegularSeries
    cycles: tuple[tuple[int, np.ndarray], ...] = ()  # (period, last cycle) added back (MSTL)


def _quiet_fit(fn: Any) -> Any:
    # statsmodels' optimiser emits ConvergenceWarning / RuntimeWarning on flat or drained series; the
    # fit is still usable and the project runs with warnings as errors, so they are silenced here only.
    from statsmodels.tools.sm_exceptions import ConvergenceWarning, ValueWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", ValueWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn()


def _fit_ets(values: np.ndarray, trend: str | None, damped: bool, season: int | None) -> Any | None:
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    if np.ptp(values) == 0:
        return None  # a constant series has nothing to estimate; persistence is exact
    kwargs: dict[str, Any] = {"error": "add", "trend": trend, "damped_trend": damped and trend is not None}
    if season and values.shape[0] >= 2 * season + 2:
        kwargs.update(seasonal="add", seasonal_periods=season)
    try:
        return _quiet_fit(lambda: ETSModel(pd.Series(values), **kwargs).fit(disp=False, maxiter=200))
    except (ValueError, np.linalg.LinAlgError):
        return None


def _ets_forecast(state: _EtsState, horizon: int, levels: tuple[int, ...]) -> PointForecast:
    s = state.series
    if state.result is None:
        mean = np.full(horizon, s.values[-1])
        return mean, empirical_bands(mean, s.values, s.observed, lambda v, o, k: v[o], 0, levels)
    n = len(s)
    prediction = _quiet_fit(lambda: state.result.get_prediction(start=n, end=n + horizon - 1))
    mean = np.asarray(prediction.predicted_mean, dtype="float64")
    bands: Bands = {}
    for level in levels:
        frame = _quiet_fit(lambda lvl=level: prediction.summary_frame(alpha=1 - lvl / 100))
        bands[level] = (frame["pi_lower"].to_numpy(float), frame["pi_upper"].to_numpy(float))
    extra = np.zeros(horizon)
    for period, cycle in state.cycles:
        extra += cycle[np.arange(horizon) % period]
    return mean + extra, {lvl: (lo + extra, hi + extra) for lvl, (lo, hi) in bands.items()}


@forecasters.register("ets")
class ETSForecaster(LocalForecaster):
    """ETS(A, Ad, N) by default; ``seasonal_period=24`` adds a daily cycle (10× slower to fit)."""

    min_length: ClassVar[int] = 10

    def __init__(
        self,
        trend: str | None = "add",
        damped_trend: bool = True,
        seasonal_period: int | None = None,
        freq: str = "1h",
    ) -> None:
        self.trend = trend
        self.damped_trend = damped_trend
        self.seasonal_period = seasonal_period
        self.freq = freq

    def _fit_one(self, series: RegularSeries) -> Any:
        result = _fit_ets(series.values, self.trend, self.damped_trend, self.seasonal_period)
        return _EtsState(result=result, series=series)

    def _fit_all(self, series: list[RegularSeries]) -> dict[str, Any]:
        states = super()._fit_all(series)
        self.fallbacks_ = sorted(sid for sid, st in states.items() if st.result is None)
        return states

    def _predict_one(self, state: Any, horizon: int, levels: tuple[int, ...]) -> PointForecast:
        return _ets_forecast(state, horizon, levels)


@forecasters.register("mstl")
class MSTLForecaster(LocalForecaster):
    """MSTL decomposition (daily + weekly), damped-trend ETS on the seasonally adjusted series.

    A period needs more than two full cycles of history; shorter series keep only the periods they can
    estimate (a series of two weeks or less keeps only the daily one).
    """

    min_length: ClassVar[int] = 10

    def __init__(self, periods: Sequence[int] = (24, 168), freq: str = "1h") -> None:
        self.periods = periods
        self.freq = freq

    def _fit_one(self, series: RegularSeries) -> Any:
        from statsmodels.tsa.seasonal import MSTL

        values = series.values
        usable = [int(p) for p in self.periods if values.shape[0] > 2 * int(p)]
        cycles: list[tuple[int, np.ndarray]] = []
        adjusted = values
        if usable and np.ptp(values) > 0:
            try:
                decomposition = _quiet_fit(lambda: MSTL(values, periods=usable).fit())
                seasonal = np.asarray(decomposition.seasonal, dtype="float64").reshape(values.shape[0], -1)
                adjusted = values - seasonal.sum(axis=1)
                cycles = [(p, seasonal[-p:, i].copy()) for i, p in enumerate(usable)]
            except (ValueError, np.linalg.LinAlgError):
                cycles, adjusted = [], values
        result = _fit_ets(adjusted, "add", True, None)
        if result is None:
            cycles = []
        return _EtsState(result=result, series=series, cycles=tuple(cycles))

    def _fit_all(self, series: list[RegularSeries]) -> dict[str, Any]:
        states = super()._fit_all(series)
        self.fallbacks_ = sorted(sid for sid, st in states.items() if st.result is None)
        return states

    def _predict_one(self, state: Any, horizon: int, levels: tuple[int, ...]) -> PointForecast:
        return _ets_forecast(state, horizon, levels)
