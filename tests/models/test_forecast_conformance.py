"""Every registered forecaster passes the same invariants: a new one inherits them all."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from models.forecast import BaseForecaster, forecasters
from models.frames import forecast_columns

H = 48
# Small settings so the whole suite fits the project's test budget; the defaults are benchmarked.
FAST: dict[str, dict[str, Any]] = {
    "lstm": {"horizon": H, "lookback_days": 7, "hidden_size": 8, "max_epochs": 2, "batch_size": 128},
    "auto": {
        "candidates": ("naive", "seasonal_naive_24", "ets", "lstm"),
        "windows": 2,
        "horizon": H,
        "step": H,
        "candidate_params": {"lstm": {"horizon": H, "lookback_days": 7, "hidden_size": 8, "max_epochs": 2}},
    },
}
NAMES = forecasters.names()


def make(name: str) -> BaseForecaster:
    est: BaseForecaster = forecasters.create(name, **FAST.get(name, {}))
    return est


_FITTED: dict[str, BaseForecaster] = {}


def fitted(name: str, history: pd.DataFrame) -> BaseForecaster:
    if name not in _FITTED:
        _FITTED[name] = make(name).fit(history)
    return _FITTED[name]


def test_every_family_is_registered() -> None:
    for name in (
        "naive",
        "drift",
        "seasonal_naive_24",
        "seasonal_naive_168",
        "window_mean_24",
        "window_mean_168",
        "seasonal_mean_24",
        "seasonal_median_24",
        "ets",
        "mstl",
        "lstm",
        "auto",
    ):
        assert name in forecasters


@pytest.mark.parametrize("name", NAMES)
def test_clone_keeps_params_and_drops_state(name: str, history: pd.DataFrame) -> None:
    est = fitted(name, history)
    twin = clone(est)
    assert twin.get_params() == est.get_params()
    assert not hasattr(twin, "states_")


@pytest.mark.parametrize("name", NAMES)
def test_predict_before_fit_raises(name: str) -> None:
    with pytest.raises(NotFittedError):
        make(name).predict(H)


@pytest.mark.parametrize("name", NAMES)
def test_horizon_grid_and_columns(name: str, history: pd.DataFrame) -> None:
    out = fitted(name, history).predict(H, level=(80, 95))
    assert list(out.columns) == forecast_columns((80, 95))
    assert out.groupby("series_id").size().to_dict() == dict.fromkeys(["busy-a", "busy-b", "flat"], H)
    last = history.groupby("series_id")["timestamp"].max()
    for sid, g in out.groupby("series_id"):
        expected = pd.date_range(last[sid] + pd.Timedelta("1h"), periods=H, freq="1h")
        assert (g["timestamp"].to_numpy() == expected.to_numpy()).all()
    assert str(out["timestamp"].dtype) == "datetime64[ns, UTC]"


@pytest.mark.parametrize("name", NAMES)
def test_intervals_nest_around_a_nonnegative_mean_and_no_nan(name: str, history: pd.DataFrame) -> None:
    out = fitted(name, history).predict(H, level=(80, 95))
    assert not out.isna().any().any()
    assert (out["mean"] >= 0).all()
    assert (out["lo-95"] <= out["lo-80"]).all()
    assert (out["lo-80"] <= out["mean"]).all()
    assert (out["mean"] <= out["hi-80"]).all()
    assert (out["hi-80"] <= out["hi-95"]).all()
    flat = out[out["series_id"] == "flat"]
    assert np.allclose(flat["mean"], 0.0, atol=0.5)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_forecast(name: str, history: pd.DataFrame) -> None:
    first = fitted(name, history).predict(H)
    second = make(name).fit(history).predict(H)
    pd.testing.assert_frame_equal(first, second)


@pytest.mark.parametrize("name", NAMES)
def test_pickle_round_trip(name: str, history: pd.DataFrame) -> None:
    est = fitted(name, history)
    again = pickle.loads(pickle.dumps(est))
    pd.testing.assert_frame_equal(est.predict(H), again.predict(H))


@pytest.mark.parametrize("name", NAMES)
def test_other_levels(name: str, history: pd.DataFrame) -> None:
    out = fitted(name, history).predict(24, level=[50, 90])
    assert list(out.columns) == forecast_columns((50, 90))
    assert (out["lo-90"] <= out["lo-50"]).all()
