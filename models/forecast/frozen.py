"""Backtest a slow global model trained once, at the oldest origin, instead of once per origin.

``auto`` no longer backtests this way (since its calibration was made fresh it trains its one backtest network
at the *newest* origin and calibrates the LSTM on that window only: ``models.forecast.memberwise`` says why);
``bench/forecast.py --frozen`` uses it to replay the earlier design. What follows is why it was built.

Why: ``auto`` backtests its pool members on a few rolling origins only to calibrate its intervals (the
pool is served whatever the backtest says), and retraining the LSTM at every origin was most of the time
of a fleet forecast (3-4 trainings per fit, each minutes for a chunk of 256 queues). Here a model whose
class sets ``backtest_frozen`` is trained once on what precedes the *oldest* origin it can use, and every
newer origin is forecast by ``update``: the same frozen network fed the history up to that origin, with
no training and no look-ahead (it saw nothing after the oldest cut). That is also how the served model is
used: the loop ``update``s a registered model for days until the next retrain, so residuals of a network
one or two weeks old are what its intervals meet in service (they are, if anything, a little wider than
those of a network retrained at every origin).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from sklearn.base import clone

from models.forecast.backtest import window_cut
from models.forecast.base import BaseForecaster, PointForecast
from models.forecast.prep import RegularSeries, to_frame

__all__ = ["FrozenForecaster", "train_once"]


class FrozenForecaster(BaseForecaster):
    """``fit`` is ``fitted.update``: forecasts from any history with ``fitted``'s parameters, never trains."""

    def __init__(self, fitted: BaseForecaster | None = None, freq: str = "1h") -> None:
        self.fitted = fitted
        self.freq = freq

    def __sklearn_clone__(self) -> Self:
        # a backtest clones its models before every fit; a clone keeps the trained model (never copied)
        return type(self)(self.fitted, self.freq)

    def _model(self) -> BaseForecaster:
        if self.fitted is None:
            raise ValueError("FrozenForecaster needs a fitted model")
        return self.fitted

    def min_history(self) -> int:
        return self._model().min_history()

    def _fit_all(self, series: list[RegularSeries]) -> dict[str, Any]:
        self.served_ = self._model()._update_regular(series)
        return dict(self.served_.states_)

    def _predict_all(self, horizon: int, levels: tuple[int, ...]) -> dict[str, PointForecast]:
        return self.served_._predict_all(horizon, levels)


def train_once(
    models: Mapping[str, BaseForecaster], series: list[RegularSeries], *, horizon: int, windows: int, step: int
) -> dict[str, BaseForecaster]:
    """``models`` for ``run_backtest`` with every ``backtest_frozen`` one trained once (see the module docstring).

    The oldest window any series is long enough for is the one trained on; a model that cannot be
    trained there is left as it was (the backtest then fits it per window and records what fails).
    """
    out: dict[str, BaseForecaster] = dict(models)
    for name, model in models.items():
        if not getattr(model, "backtest_frozen", False):
            continue
        need = model.min_history()
        for window in range(windows - 1, -1, -1):
            cuts = [(s, window_cut(s, horizon, step, window)) for s in series]
            usable = [
                RegularSeries(s.series_id, s.start, s.freq, s.values[:cut], s.observed[:cut])
                for s, cut in cuts
                if cut >= need
            ]
            if usable:
                try:
                    fitted = clone(model).fit(to_frame(usable))
                except ValueError:
                    break
                out[name] = FrozenForecaster(fitted, freq=model.freq)
                break
    return out
