"""``auto`` trains its LSTM once for the backtest; a network frozen at the oldest origin never sees the future.

What a user relies on: a fleet forecast does not retrain the network at every backtest origin (that was
most of its time), and the backtest that calibrates the intervals stays honest: the network that forecasts
each origin was trained only on hours before the oldest origin, and at that origin it forecasts exactly
what a network trained there would.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from models.forecast import LSTMForecaster, auto, run_backtest
from models.forecast.backtest import window_cut
from models.forecast.frozen import FrozenForecaster, train_once
from models.forecast.prep import regularize
from tests.models.conftest import synthetic_history

H, STEP, WINDOWS = 12, 24, 3
TINY_LSTM: dict[str, Any] = {"horizon": H, "lookback_days": 2, "hidden_size": 4, "max_epochs": 2}
HISTORY = synthetic_history(hours=360, end_offset_h=5)  # series ending at different hours share the backtest


def test_auto_trains_the_lstm_once_for_its_backtest_and_once_to_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    trained: list[int] = []  # training samples of each fit (all of its bagged networks together)
    original = LSTMForecaster._bagged

    def counting(self: LSTMForecaster, data: dict[str, Any]) -> Any:
        trained.append(len(data["seq"]))
        return original(self, data)

    monkeypatch.setattr(LSTMForecaster, "_bagged", counting)
    model = auto.AutoForecaster(windows=WINDOWS, step=STEP, horizon=H, candidate_params={"lstm": TINY_LSTM})
    forecast = model.fit(HISTORY).predict(H)
    assert len(trained) == 2  # not once per backtest window plus once to serve
    assert trained[0] < trained[1]  # the backtest's network saw less history than the served one
    assert forecast["series_id"].nunique() == 3 and forecast["mean"].notna().all()
    assert model.states_["busy-a"].band_scores  # the intervals are still calibrated on the backtest


def test_the_backtest_network_saw_only_hours_before_the_oldest_origin() -> None:
    series = regularize(HISTORY)
    frozen = train_once({"lstm": LSTMForecaster(**TINY_LSTM)}, series, horizon=H, windows=WINDOWS, step=STEP)["lstm"]
    assert isinstance(frozen, FrozenForecaster) and frozen.fitted is not None
    for s in series:
        oldest_cut = window_cut(s, H, STEP, WINDOWS - 1)
        assert frozen.fitted.last_timestamps_[s.series_id] == s.start + (oldest_cut - 1) * s.freq


def test_at_the_oldest_origin_the_frozen_network_forecasts_what_a_fresh_fit_would() -> None:
    frozen = run_backtest(
        HISTORY,
        train_once({"lstm": LSTMForecaster(**TINY_LSTM)}, regularize(HISTORY), horizon=H, windows=WINDOWS, step=STEP),
        horizon=H,
        windows=WINDOWS,
        step=STEP,
    ).records
    fresh = run_backtest(HISTORY, {"lstm": LSTMForecaster(**TINY_LSTM)}, horizon=H, windows=WINDOWS, step=STEP).records
    oldest = WINDOWS - 1
    pd.testing.assert_frame_equal(
        frozen[frozen["window"] == oldest].reset_index(drop=True),
        fresh[fresh["window"] == oldest].reset_index(drop=True),
    )
    assert set(frozen["window"]) == set(fresh["window"])  # every newer origin is still backtested


def test_a_series_larger_than_any_trained_on_is_served_at_the_nearest_trained_scale() -> None:
    # a queue the frozen network never saw, 75 times the largest it trained on (Alibaba's dlrm2025/HN_all at
    # the oldest origin): with its own scale as input the network extrapolated hundreds of GPUs off
    model = LSTMForecaster(**TINY_LSTM).fit(HISTORY)
    largest = HISTORY[HISTORY["series_id"] == "busy-a"]
    huge = largest.assign(series_id="huge", value=75 * largest["value"])
    forecast = model.update(pd.concat([HISTORY, huge], ignore_index=True)).predict(H)
    mean = {sid: g["mean"].to_numpy() for sid, g in forecast.groupby("series_id")}
    # same shape, same inputs once scaled: the larger queue gets the largest trained queue's forecast, scaled
    assert mean["huge"] == pytest.approx(75 * mean["busy-a"], rel=1e-4)
