"""ETS and MSTL forecasters from statsmodels, behind the common contract.

ETS (additive error, damped additive trend) follows trend and level shifts without extrapolating them
forever; MSTL removes daily and weekly cycles first and runs the same ETS on what is left, which is how
the weak Philly seasonality is best used. Intervals are the models' own analytic ones; ``auto`` recalibrates
whatever it serves on backtest residuals. statsmodels warns freely (convergence, overflow in the likelihood
search on drained series); those warnings are expected on real data and are silenced around the fit only.
If a fit fails outright the series falls back to persistence, recorded in ``fallbacks_``.

Serving (``update``) never re-estimates. ETS filters the new window with the frozen fitted parameters,
starting from the state the fit had reached just before the window's first step, so where the new
window overlaps the training one the result is exactly the fitted filter continued over the new hours
(a window that does not overlap starts from its first value with zero trend). MSTL keeps the seasonal
cycles it estimated at fit time, phase-aligned to the new window (re-running the decomposition would be
estimating them again), and filters the seasonally adjusted window the same way. Interval widths come
from the frozen filter's one-step residuals on the new window (statsmodels derives the error variance from
the filtered data); for MSTL they are wider than at fit time, as frozen cycles explain less of the window
than a refitted decomposition does. A series without fitted
parameters (not seen at fit time, or whose fit failed) is served by persistence until the next training.
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


def _steps(later: pd.Timestamp, earlier: pd.Timestamp, freq: pd.Timedelta) -> int | None:
    """Whole grid steps from ``earlier`` to ``later``; None when the two are not on one grid."""
    delta = later - earlier
    return int(delta // freq) if delta % freq == pd.Timedelta(0) else None


def _continue_ets(fitted: Any, offset: int | None, values: np.ndarray) -> Any:
    """``fitted`` (an ETS result) filtered over ``values`` with its parameters frozen. ``values[0]`` sits
    ``offset`` steps after the fitted series' first step; the initial states are the ones the fitted filter
    held just before that step (None or outside the fitted span: the first value, zero trend)."""
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    model = fitted.model
    names = list(model.param_names)
    params = dict(zip(names, np.asarray(fitted.params, dtype="float64"), strict=True))
    states = fitted.states
    n_fit = len(states)
    m = int(model.seasonal_periods) if model.seasonal else 0
    seasonal_keys = [f"initial_seasonal.{k}" for k in range(m) if f"initial_seasonal.{k}" in params]
    if offset is not None and 0 <= offset <= n_fit:
        if offset > 0:  # the state after the fitted step just before the window (offset 0: the initial one)
            params["initial_level"] = float(states["level"].iloc[offset - 1])
            if "initial_trend" in params:
                params["initial_trend"] = float(states["trend"].iloc[offset - 1])
        if seasonal_keys:  # initial_seasonal.k is the seasonal state k + 1 steps before the first value
            initial = np.array([params[key] for key in seasonal_keys])
            path = np.concatenate([initial[::-1], states["seasonal"].to_numpy(float)])
            for k, key in enumerate(seasonal_keys):
                params[key] = float(path[len(seasonal_keys) + offset - 1 - k])
    else:
        params["initial_level"] = float(values[0])
        if "initial_trend" in params:
            params["initial_trend"] = 0.0
    kwargs: dict[str, Any] = {"error": model.error, "trend": model.trend, "damped_trend": bool(model.damped_trend)}
    if m:
        kwargs.update(seasonal=model.seasonal, seasonal_periods=m)
    vector = np.array([params[name] for name in names])
    return _quiet_fit(lambda: ETSModel(pd.Series(values), **kwargs).smooth(vector))


def _update_ets(state: _EtsState | None, series: RegularSeries) -> _EtsState:
    """The serving state of ``series`` from its fitted one (see the module docstring)."""
    if state is None or state.result is None:
        return _EtsState(result=None, series=series)
    old = state.series
    offset = _steps(series.start, old.start, series.freq)
    shift = _steps(series.end, old.end, series.freq)
    if shift is None:  # a different grid: nothing to align the cycles with
        return _EtsState(result=None, series=series)
    seasonal = np.zeros(len(series))
    cycles = []
    first = int((series.start - old.end) // series.freq)  # steps from the fitted last step to the window's first
    for period, cycle in state.cycles:
        # cycle[i] is the seasonal value at (fitted end - period + 1 + i), repeating every period
        seasonal += cycle[(first + period - 1 + np.arange(len(series))) % period]
        cycles.append((period, np.roll(cycle, -shift)))
    result = _continue_ets(state.result, offset, series.values - seasonal)
    return _EtsState(result=result, series=series, cycles=tuple(cycles))


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


class _EtsFiltered(LocalForecaster):
    """What ETS and MSTL share: an ``_EtsState`` per series, filtered forward at serve time with its frozen
    parameters, forecast by the ETS recursion, and ``fallbacks_`` naming series whose fit failed."""

    min_length: ClassVar[int] = 10

    def _fit_all(self, series: list[RegularSeries]) -> dict[str, Any]:
        states = super()._fit_all(series)
        self.fallbacks_ = sorted(sid for sid, st in states.items() if st.result is None)
        return states

    def _update_one(self, state: Any | None, series: RegularSeries) -> Any:
        return _update_ets(state, series)

    def _update_all(self, series: list[RegularSeries]) -> dict[str, Any]:
        states = super()._update_all(series)
        self.fallbacks_ = sorted(sid for sid, st in states.items() if st.result is None)
        return states

    def _predict_one(self, state: Any, horizon: int, levels: tuple[int, ...]) -> PointForecast:
        return _ets_forecast(state, horizon, levels)


@forecasters.register("ets")
class ETSForecaster(_EtsFiltered):
    """ETS(A, Ad, N) by default; ``seasonal_period=24`` adds a daily cycle (10× slower to fit)."""

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


@forecasters.register("mstl")
class MSTLForecaster(_EtsFiltered):
    """MSTL decomposition (daily + weekly), damped-trend ETS on the seasonally adjusted series.

    A period needs more than two full cycles of history; shorter series keep only the periods they can
    estimate (a series of two weeks or less keeps only the daily one).
    """

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
