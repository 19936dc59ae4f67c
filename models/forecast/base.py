"""The one forecaster contract: ``fit(frame)`` then ``predict(h, level=(80, 95))`` → forecast frame.

Serving adds ``update(frame)``: a fitted model's state follows the newest history with its parameters
frozen (no training, no backtest), in the way each model defines; the loop forecasts a registered model
with ``update(history).predict(h)``, so what was registered is what is served.

Subclasses only say how to fit one series and forecast it (or, for global models, all series at once);
everything a caller relies on lives here once: frame validation and regularisation, the forecast grid that
continues each series' last timestamp, clipping at 0 (GPU demand is never negative), nested intervals
(``lo-95 ≤ lo-80 ≤ mean ≤ hi-80 ≤ hi-95``) and the promise that no NaN ever leaves ``predict``.
Estimators follow scikit-learn conventions (constructor arguments stored unchanged as attributes, learnt
state in attributes ending in ``_``) so ``clone`` and pickling need no special cases.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any, ClassVar, Self

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from models.forecast.prep import (
    ForecastInputError,
    RegularSeries,
    check_levels,
    parse_freq,
    regularize,
)
from models.frames import ID, TIME, forecast_columns

__all__ = ["Bands", "BaseForecaster", "LocalForecaster", "PointForecast"]

# level -> (lower, upper) arrays of length h
Bands = dict[int, tuple[np.ndarray, np.ndarray]]
PointForecast = tuple[np.ndarray, Bands]


class BaseForecaster(BaseEstimator):  # type: ignore[misc]
    """Base of every forecaster. Subclasses implement ``_fit_all`` and ``_predict_all``.

    ``min_length`` is the shortest history (in grid steps) the model can fit; ``auto`` uses it to drop
    candidates on short series, and ``fit`` refuses shorter series with a message that says so.
    """

    min_length: ClassVar[int] = 2
    freq: str

    # --- what subclasses implement ---------------------------------------------------------------
    def _fit_all(self, series: list[RegularSeries]) -> dict[str, Any]:
        raise NotImplementedError

    def _predict_all(self, horizon: int, levels: tuple[int, ...]) -> dict[str, PointForecast]:
        raise NotImplementedError

    def _update_all(self, series: list[RegularSeries]) -> dict[str, Any]:
        """Per-series states for ``series`` from the fitted parameters (called on a copy; see ``update``)."""
        raise NotImplementedError

    def min_history(self) -> int:
        """Shortest history (grid steps) this configuration can fit; may depend on parameters."""
        return self.min_length

    # --- the contract ------------------------------------------------------------------------------
    def fit(self, frame: pd.DataFrame) -> Self:
        series = regularize(frame, self.freq)
        self._check_length(series)
        self._adopt_grid(series)
        self.states_ = self._fit_all(series)
        return self

    def _check_length(self, series: list[RegularSeries]) -> None:
        short = [s for s in series if len(s) < self.min_history()]
        if short:
            raise ForecastInputError(
                f"{type(self).__name__} needs at least {self.min_history()} steps of history; "
                f"series {short[0].series_id!r} has {len(short[0])}"
            )

    def _adopt_grid(self, series: list[RegularSeries]) -> None:
        """The forecast grid continues ``series``: their ids, last timestamps and last values."""
        self.freq_ = parse_freq(self.freq)
        self.series_ids_ = [s.series_id for s in series]
        self.last_timestamps_ = {s.series_id: s.end for s in series}
        self.last_values_ = {s.series_id: float(s.values[-1]) for s in series}

    def update(self, frame: pd.DataFrame) -> Self:
        """A copy of this fitted model that forecasts from ``frame``, the newest history, with every fitted
        parameter frozen: no training and no backtest. The forecast grid continues each series of ``frame``
        (not the training history), and only the series in ``frame`` are forecast. ``self`` is unchanged, so
        a loaded model can be updated every cycle; the copy shares the frozen parameters (not copied).
        """
        check_is_fitted(self, "states_")
        return self._update_regular(regularize(frame, self.freq))

    def _update_regular(self, series: list[RegularSeries]) -> Self:
        """``update`` on series already on the grid (``auto`` hands its members what it regularised)."""
        self._check_length(series)
        model = copy.copy(self)
        model._adopt_grid(series)
        model.states_ = model._update_all(series)
        return model

    def predict(self, h: int, level: Iterable[float] = (80, 95)) -> pd.DataFrame:
        check_is_fitted(self, "states_")
        if int(h) != h or h < 1:
            raise ForecastInputError(f"horizon must be a positive integer, got {h!r}")
        horizon = int(h)
        levels = check_levels(level)
        points = self._points(horizon, levels)
        # one frame from concatenated columns: a frame per series cost ~1 ms each, seconds for 1,000 queues
        ids = self.series_ids_
        starts = np.array([(self.last_timestamps_[sid] + self.freq_).value for sid in ids], dtype="int64")
        steps = np.arange(horizon, dtype="int64") * int(self.freq_.value)
        data: dict[str, Any] = {
            ID: np.repeat(np.array(ids, dtype=object), horizon),
            TIME: pd.to_datetime((starts[:, None] + steps[None, :]).ravel(), utc=True),
            "mean": _column([points[sid][0] for sid in ids]),
        }
        for lvl in levels:
            data[f"lo-{lvl}"] = _column([points[sid][1][lvl][0] for sid in ids])
            data[f"hi-{lvl}"] = _column([points[sid][1][lvl][1] for sid in ids])
        out = pd.DataFrame(data)
        out[TIME] = out[TIME].astype("datetime64[ns, UTC]")
        return out[forecast_columns(levels)]

    def _points(self, horizon: int, levels: tuple[int, ...]) -> dict[str, PointForecast]:
        """Per series, the forecast ``predict`` returns, as arrays (clipped, NaN-free, nested bands)."""
        raw = self._predict_all(horizon, levels)
        return {sid: _tidy(*raw[sid], levels, fallback=self.last_values_[sid]) for sid in self.series_ids_}


def _column(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0)


def _tidy(mean: np.ndarray, bands: Bands, levels: tuple[int, ...], fallback: float) -> tuple[np.ndarray, Bands]:
    """Clip at 0, replace any NaN, and nest the intervals around the mean."""
    mean = np.asarray(mean, dtype="float64")
    # A NaN mean means the model broke down on this series; persistence is the least surprising stand-in.
    mean = np.where(np.isfinite(mean), mean, fallback)
    mean = np.clip(mean, 0.0, None)
    out: Bands = {}
    lo_prev, hi_prev = mean, mean
    for lvl in levels:  # ascending: each wider interval must contain the narrower one
        lo, hi = (np.asarray(b, dtype="float64") for b in bands[lvl])
        lo = np.where(np.isfinite(lo), lo, mean)
        hi = np.where(np.isfinite(hi), hi, mean)
        lo = np.clip(np.minimum(lo, lo_prev), 0.0, None)
        hi = np.maximum(hi, hi_prev)
        out[lvl] = (lo, hi)
        lo_prev, hi_prev = lo, hi
    return mean, out


class LocalForecaster(BaseForecaster):
    """A model fitted to each series on its own (baselines, ETS, MSTL)."""

    def _fit_one(self, series: RegularSeries) -> Any:
        raise NotImplementedError

    def _predict_one(self, state: Any, horizon: int, levels: tuple[int, ...]) -> PointForecast:
        raise NotImplementedError

    def _update_one(self, state: Any | None, series: RegularSeries) -> Any:
        """The state serving ``series`` given its fitted ``state`` (None: not seen at fit time).

        This default is for models without fitted parameters (baselines, window means): their state is the
        window itself, so serving recomputes everything from the new history.
        """
        return series

    def _fit_all(self, series: list[RegularSeries]) -> dict[str, Any]:
        return {s.series_id: self._fit_one(s) for s in series}

    def _update_all(self, series: list[RegularSeries]) -> dict[str, Any]:
        return {s.series_id: self._update_one(self.states_.get(s.series_id), s) for s in series}

    def _predict_all(self, horizon: int, levels: tuple[int, ...]) -> dict[str, PointForecast]:
        return {sid: self._predict_one(state, horizon, levels) for sid, state in self.states_.items()}
