"""The forecasts a replayed loop plans from (``--forecaster``): the served ``auto``, persistence, the oracle.

- ``auto``: what production serves. The forecast CronJob's model (``auto`` at its horizon, built with the
  training pipeline's parameters, ``models.forecast.serving_params``) is retrained weekly on the replay's
  past only, written as the registry stores it (state files) and read back, then served every cycle by
  ``ServedModel.forecast``: the very call the loop's ``RegistryForecaster`` makes. Between retrains
  nothing is refitted; the stored state is updated with the newest history, as in the loop.
- ``naive``: persistence fitted on each cycle's history, as ``predictor loop --model naive`` does.
- ``oracle``: the true future zero-wait demand (the upper bound of the planner's rules).

Every forecaster sees the history the loop's history reader would return (its lookback); ``auto`` is
trained on the days the training command reads (its ``--days`` default). The replay cannot reach the
training pipeline (it sits below it), so the job's defaults are restated here and a test pins them.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pandas as pd

from models.frames import ID, TIME, VALUE
from predictor.errors import ModelError, RegistryError
from predictor.replay.demand import zero_wait_demand

if TYPE_CHECKING:  # the registry (MLflow behind its package) loads only where a replay serves a model
    from predictor.registry.served import ServedModel

__all__ = [
    "FORECASTERS",
    "SERVE_LOOKBACK",
    "TRAIN_HORIZON_H",
    "TRAIN_LOOKBACK",
    "NaiveForecaster",
    "OracleForecaster",
    "ReplayForecaster",
    "ServedAuto",
    "make_forecaster",
    "registered",
]

FORECASTERS = ("auto", "naive", "oracle")
HOUR = pd.Timedelta(hours=1)
QUANTILES = ("mean", "lo-80", "hi-80", "lo-95", "hi-95")
LEVELS = (80, 95)
TRAIN_MODEL = "auto"  # what the forecast CronJob trains (``train forecast`` with its defaults)
TRAIN_HORIZON_H = 168  # ``train forecast --horizon`` default: the horizon the registered model serves
TRAIN_FREQ = "1h"
TRAIN_LOOKBACK = pd.Timedelta(days=70)  # ``train forecast --days`` default: the Prometheus history it reads
SERVE_LOOKBACK = pd.Timedelta(hours=28 * 24)  # the loop's history reader's default lookback


class ReplayForecaster(Protocol):
    """A replayed loop's forecaster: ``retrain`` at each week's start, ``forecast`` every planning cycle."""

    retrains: int

    def retrain(self, history: pd.DataFrame) -> None: ...

    def forecast(self, history: pd.DataFrame, *, now: pd.Timestamp, horizon: int) -> pd.DataFrame: ...


def _recent(history: pd.DataFrame, now: pd.Timestamp, lookback: pd.Timedelta) -> pd.DataFrame:
    return history.loc[(history[TIME] <= now) & (history[TIME] > now - lookback), [ID, TIME, VALUE]]


def registered(estimator: object) -> ServedModel:
    """``estimator`` as the loop would hold it after loading it from the registry: written as the registry's
    state files and read back (what does not survive that round trip is not served)."""
    from predictor.registry.modeldir import read_state_dir, write_state_dir
    from predictor.registry.served import ServedModel

    with tempfile.TemporaryDirectory(prefix="replay-model-") as tmp:
        write_state_dir(estimator, "forecast", Path(tmp))
        loaded, kind = read_state_dir(Path(tmp), what="the replay's retrained model")
    return ServedModel(loaded, kind)


class ServedAuto:
    """The forecast pipeline's ``auto``, retrained weekly and served through the loop's serving call."""

    def __init__(self) -> None:
        self.served: ServedModel | None = None
        self.retrains = 0
        self.failures: list[str] = []  # retrains that failed: the previous model keeps serving, as in the loop

    def retrain(self, history: pd.DataFrame) -> None:
        from models.forecast import forecasters, serving_params

        frame = _recent(history, history[TIME].max(), TRAIN_LOOKBACK)
        model = forecasters.create(TRAIN_MODEL, freq=TRAIN_FREQ, **serving_params(TRAIN_MODEL, TRAIN_HORIZON_H, {}))
        try:
            self.served = registered(model.fit(frame))
        except (ValueError, RegistryError) as exc:
            self.failures.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        else:
            self.retrains += 1

    def forecast(self, history: pd.DataFrame, *, now: pd.Timestamp, horizon: int) -> pd.DataFrame:
        if self.served is None:
            raise ModelError("no model is registered yet (the first retrain failed)")
        return self.served.forecast(_recent(history, now, SERVE_LOOKBACK), horizon, LEVELS)


class NaiveForecaster:
    """Persistence (the last hour's demand, with its residual bands), fitted on each cycle's history: the
    loop's ``--model naive`` (an unregistered estimator is fitted every cycle)."""

    def __init__(self) -> None:
        self.retrains = 0

    def retrain(self, history: pd.DataFrame) -> None:
        del history  # fitted every cycle: nothing to keep between weeks

    def forecast(self, history: pd.DataFrame, *, now: pd.Timestamp, horizon: int) -> pd.DataFrame:
        from models.forecast import forecasters

        try:
            frame: pd.DataFrame = (
                forecasters.create("naive", freq=TRAIN_FREQ)
                .fit(_recent(history, now, SERVE_LOOKBACK))
                .predict(horizon, level=LEVELS)
            )
        except (ValueError, ArithmeticError) as exc:
            raise ModelError(f"forecaster naive failed: {exc}".splitlines()[0]) from exc
        return frame


class OracleForecaster:
    """The true future zero-wait demand as a forecast with no spread (every quantile is the truth)."""

    def __init__(self, jobs: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp, horizon_h: int) -> None:
        self.demand = zero_wait_demand(jobs, start, end + pd.Timedelta(hours=horizon_h + 1))
        self.retrains = 0

    def retrain(self, history: pd.DataFrame) -> None:
        del history  # nothing to learn: it knows the future

    def forecast(self, history: pd.DataFrame, *, now: pd.Timestamp, horizon: int) -> pd.DataFrame:
        del history
        window = self.demand[(self.demand[TIME] > now) & (self.demand[TIME] <= now + horizon * HOUR)]
        frame = window[[ID, TIME]].copy()
        for column in QUANTILES:
            frame[column] = window[VALUE].to_numpy()
        return frame.reset_index(drop=True)


def make_forecaster(
    name: str, jobs: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp, horizon_h: int
) -> ReplayForecaster:
    """The forecaster ``--forecaster name`` plans from (``jobs``: the oracle's future)."""
    if name == "oracle":
        return OracleForecaster(jobs, start, end, horizon_h)
    if name == "naive":
        return NaiveForecaster()
    if name == "auto":
        return ServedAuto()
    raise ModelError(f"--forecaster {name!r} is not one of {', '.join(FORECASTERS)}")
