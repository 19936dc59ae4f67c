"""Serving a fitted forecaster: ``update(newest history)`` forecasts with the frozen model, never training.

What the loop relies on: the forecast of an updated model is what the frozen model says about the new
window (for ETS exactly the fitted filter continued over the new hours), it follows the data, it starts
after the newest point, nothing is fitted or backtested while serving, the loaded model itself is left as
it was, and all of this holds after the registry's state round trip (``models.state``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd
import pytest

from models.forecast import BaseForecaster, LSTMForecaster, auto, forecasters, parallel
from models.forecast.lstm import _Features, _window_scale
from models.forecast.prep import regularize
from models.state import from_state, to_state
from tests.models.conftest import synthetic_history

H = 12
TINY_LSTM = {"horizon": H, "lookback_days": 2, "hidden_size": 4, "max_epochs": 1}
BASELINES = ["naive", "drift", "seasonal_naive_24", "window_mean_24", "seasonal_mean_24"]


def _window(frame: pd.DataFrame, first_h: int, last_h: int) -> pd.DataFrame:
    """Rows whose timestamp is in [start + first_h, start + last_h) hours."""
    start, t = frame["timestamp"].min(), frame["timestamp"]
    keep = (t >= start + pd.Timedelta(hours=first_h)) & (t < start + pd.Timedelta(hours=last_h))
    return frame[keep].reset_index(drop=True)


DATA = synthetic_history(hours=600)
OLD = _window(DATA, 0, 480)
NEW = _window(DATA, 120, 600)  # the same queues 120 hours later, overlapping the training window as in the loop


@contextmanager
def no_training(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every way a forecaster could train or backtest raises inside the block."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("serving must not fit or backtest")

    with monkeypatch.context() as mp:
        mp.setattr(BaseForecaster, "fit", refuse)
        mp.setattr(LSTMForecaster, "_train", refuse)
        mp.setattr(parallel, "run_backtest", refuse)  # auto backtests through models.forecast.parallel
        mp.setattr(auto, "plan_from_records", refuse)
        yield


def _serve(model: Any, frame: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> pd.DataFrame:
    with no_training(monkeypatch):
        forecast: pd.DataFrame = model.update(frame).predict(H)
    return forecast


def _round_trip(model: Any) -> Any:
    meta, arrays = to_state(model)
    return from_state(meta, arrays)


def _starts_after_newest(forecast: pd.DataFrame, history: pd.DataFrame) -> None:
    newest = history.groupby("series_id")["timestamp"].max()
    first = forecast.groupby("series_id")["timestamp"].min()
    assert set(first.index) == set(newest.index)
    assert (first == newest + pd.Timedelta(hours=1)).all()


def _scaled(frame: pd.DataFrame, factor: float) -> pd.DataFrame:
    return frame.assign(value=frame["value"] * factor)


@pytest.mark.parametrize("name", BASELINES)
def test_baselines_recompute_everything_from_the_new_window(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fitted = forecasters.create(name).fit(OLD)
    served = _serve(fitted, NEW, monkeypatch)
    # no fitted parameters: serving on the new window is exactly the model on that window
    pd.testing.assert_frame_equal(served, forecasters.create(name).fit(NEW).predict(H))
    _starts_after_newest(served, NEW)
    pd.testing.assert_frame_equal(_serve(_round_trip(fitted), NEW, monkeypatch), served)


@pytest.mark.parametrize("season", [None, 24])
def test_ets_serving_is_the_fitted_filter_continued_over_the_new_hours(
    season: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    fitted = forecasters.create("ets", seasonal_period=season).fit(OLD)
    served = _serve(fitted, NEW, monkeypatch)
    _starts_after_newest(served, NEW)
    whole = {s.series_id: s.values for s in regularize(DATA)}
    for sid in ("busy-a", "busy-b"):
        result = fitted.states_[sid].result
        # by hand: the fitted parameters, filtered over the training window and on through the new hours
        spec: dict[str, Any] = {"seasonal": "add", "seasonal_periods": season} if season else {}
        model = ETSModel(pd.Series(whole[sid]), error="add", trend="add", damped_trend=True, **spec)
        by_hand = model.smooth(result.params)
        n = whole[sid].shape[0]
        expected = np.clip(by_hand.get_prediction(start=n, end=n + H - 1).predicted_mean, 0, None)
        got = served.loc[served["series_id"] == sid, "mean"].to_numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)
    assert served.loc[served["series_id"] == "flat", "mean"].eq(0).all()  # no parameters fitted: persistence
    pd.testing.assert_frame_equal(_serve(_round_trip(fitted), NEW, monkeypatch), served)
    changed = _serve(fitted, _scaled(NEW, 1.5), monkeypatch)
    assert not np.allclose(changed["mean"], served["mean"])


def test_mstl_serving_keeps_its_fitted_cycles_and_follows_the_data(monkeypatch: pytest.MonkeyPatch) -> None:
    fitted = forecasters.create("mstl").fit(OLD)
    # on the window it was fitted on, serving gives the fitted point forecast (the bands are the frozen
    # filter's residual spread, which the frozen cycles make wider than the refitted decomposition's)
    same = _serve(fitted, OLD, monkeypatch)
    # (to the filter's memory of where the frozen and the refitted cycles differ, hundreds of hours back)
    np.testing.assert_allclose(same["mean"], fitted.predict(H)["mean"], rtol=1e-4)
    assert (same["hi-80"] - same["lo-80"] >= fitted.predict(H)["hi-80"] - fitted.predict(H)["lo-80"] - 1e-9).all()
    served = _serve(fitted, NEW, monkeypatch)
    _starts_after_newest(served, NEW)
    assert not np.allclose(_serve(fitted, _scaled(NEW, 1.5), monkeypatch)["mean"], served["mean"])
    pd.testing.assert_frame_equal(_serve(_round_trip(fitted), NEW, monkeypatch), served)
    assert {p for p, _ in fitted.states_["busy-a"].cycles} == {24, 168}


def test_lstm_serving_is_one_pass_of_the_frozen_network_on_the_new_window(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    fitted = forecasters.create("lstm", **TINY_LSTM).fit(OLD)
    pd.testing.assert_frame_equal(_serve(fitted, OLD, monkeypatch), fitted.predict(H))
    served = _serve(fitted, NEW, monkeypatch)
    _starts_after_newest(served, NEW)
    median = list(fitted.quantiles_).index(0.5)
    for s in regularize(NEW):
        scale = _window_scale(s)
        # the scale feature clipped to the trained range (a queue grown past it is served as the largest trained)
        seq, static, base = _Features(s, scale, 2 * 24, H, fitted.log_scale_range_).inputs(np.array([len(s)]))
        with torch.no_grad():  # every bagged network on the same inputs, their quantile outputs averaged
            inputs = (torch.from_numpy(seq), torch.from_numpy(static), torch.from_numpy(base))
            out = np.mean([net(*inputs).numpy().astype("float64") for net in fitted.nets_], axis=0)
        expected = np.clip(np.sort(out[0], axis=1)[:, median] * scale, 0, None)
        got = served.loc[served["series_id"] == s.series_id, "mean"].to_numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)  # batched vs one series: float noise
    pd.testing.assert_frame_equal(_serve(_round_trip(fitted), NEW, monkeypatch), served)


@pytest.fixture(scope="module")
def fitted_auto() -> Any:
    model = auto.AutoForecaster(windows=2, step=24, horizon=H, candidate_params={"lstm": TINY_LSTM})
    return model.fit(OLD)


def test_auto_keeps_its_fitted_plans_and_serves_its_updated_members(
    fitted_auto: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = fitted_auto.predict(H)
    with no_training(monkeypatch):
        served_model = fitted_auto.update(NEW)
        served = served_model.predict(H)
    _starts_after_newest(served, NEW)
    pd.testing.assert_frame_equal(fitted_auto.predict(H), before)  # the loaded model is left as it was
    members = {m: model.update(NEW).predict(H) for m, model in fitted_auto.members_.items()}
    for sid, plan in fitted_auto.states_.items():
        assert served_model.states_[sid] is plan  # choice, weights and conformal state as registered
        expected = sum(
            w * members[m].loc[members[m]["series_id"] == sid, "mean"].to_numpy() for m, w in plan.weights.items()
        )
        got = served.loc[served["series_id"] == sid, "mean"].to_numpy()
        np.testing.assert_allclose(got, np.clip(expected, 0, None), rtol=1e-9)
    pd.testing.assert_frame_equal(_serve(_round_trip(fitted_auto), NEW, monkeypatch), served)
    assert not np.allclose(_serve(fitted_auto, _scaled(NEW, 1.5), monkeypatch)["mean"], served["mean"])


def test_auto_serves_a_series_it_never_saw_with_the_robust_pool(
    fitted_auto: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    newcomer = NEW[NEW["series_id"] == "busy-a"].assign(series_id="newcomer")
    short = NEW[NEW["series_id"] == "busy-b"].tail(30).assign(series_id="young")  # too short for the LSTM
    frame = pd.concat([NEW, newcomer, short], ignore_index=True)
    with no_training(monkeypatch):
        model = fitted_auto.update(frame)
        served = model.predict(H)
    _starts_after_newest(served, frame)
    # The default pool with its registered weights (lstm 0.8, naive 0.1, drift 0.1), never a refit.
    expected = dict(zip(fitted_auto.rule().pool, fitted_auto.rule().weights, strict=True))
    assert model.states_["newcomer"].weights == pytest.approx(expected)
    assert model.states_["young"].weights == pytest.approx({"naive": 0.5, "drift": 0.5})  # no LSTM: renormalised
    assert "not seen at fit time" in model.notes_["newcomer"]
    assert served[["mean", "lo-95", "hi-95"]].notna().all().all()


def test_auto_falls_back_to_persistence_when_no_member_can_serve_a_series(
    fitted_auto: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import copy

    lstm_only = copy.copy(fitted_auto)
    lstm_only.members_ = {"lstm": fitted_auto.members_["lstm"]}
    lstm_only.states_ = {sid: auto.SeriesPlan(weights={"lstm": 1.0}) for sid in fitted_auto.states_}
    short = NEW[NEW["series_id"] == "busy-b"].tail(30)  # too short for the LSTM
    with no_training(monkeypatch):
        model = lstm_only.update(short)
        served = model.predict(H)
    assert model.states_["busy-b"].weights == {"naive": 1.0}
    assert "too few" in model.notes_["busy-b"]
    assert served["mean"].eq(short["value"].iloc[-1]).all()
