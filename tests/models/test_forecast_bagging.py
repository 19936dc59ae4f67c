"""Bagged LSTMs (``bags``): several networks on disjoint shares of the training origins, served as their mean.

What a user relies on: the served forecast is the mean of the networks' outputs (none is dropped or
weighted in secret), together they train on every origin once, ``bags=1`` is the single network it always
was, a model is bagged unless asked otherwise, a history with fewer training origins than networks still
fits (with as many networks as origins), a bagged model survives the registry's state format with
identical forecasts, and a bad ``bags`` is one error naming it.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch

from models.forecast import LSTMForecaster
from models.forecast.prep import ForecastInputError
from models.state import from_state, to_state
from tests.models.conftest import synthetic_history

H = 12
TINY: dict[str, Any] = {"horizon": H, "lookback_days": 2, "hidden_size": 4, "max_epochs": 2}
HISTORY = synthetic_history(hours=300, seed=3)


@pytest.fixture(scope="module")
def bagged() -> LSTMForecaster:
    return LSTMForecaster(**TINY, bags=3).fit(HISTORY)


def test_a_bagged_forecast_is_the_mean_of_its_networks(bagged: LSTMForecaster) -> None:
    assert len(bagged.nets_) == 3 and len(bagged.epochs_by_bag_) == 3
    served = bagged.predict(H)
    singles = []
    for net in bagged.nets_:
        one = LSTMForecaster(**TINY, bags=1)
        one.__dict__.update({k: v for k, v in bagged.__dict__.items() if k.endswith("_")})
        one.nets_, one.net_ = [net], net
        singles.append(one.predict(H).sort_values(["series_id", "timestamp"])["mean"].to_numpy())
    served_mean = served.sort_values(["series_id", "timestamp"])["mean"].to_numpy()
    assert not np.allclose(singles[0], singles[1])  # different shares of the data: different networks
    # the served mean is the median of the networks' averaged quantile outputs
    inputs = list(bagged.last_inputs_.values())
    seq, static, base = (torch.from_numpy(np.concatenate([v[i] for v in inputs])) for i in range(3))
    with torch.no_grad():
        outs = np.mean([net(seq, static, base).numpy() for net in bagged.nets_], axis=0)
    median = np.sort(outs, axis=2)[:, :H, list(bagged.quantiles_).index(0.5)]
    scales = np.array([bagged.scales_[s] for s in bagged.last_inputs_])[:, None]
    order = np.argsort(list(bagged.last_inputs_))
    expected = np.maximum(median * scales, 0)[order].ravel()  # demand is never forecast below zero
    np.testing.assert_allclose(served_mean, expected, rtol=1e-5, atol=1e-6)


def test_the_bags_share_the_training_origins_between_them() -> None:
    one = LSTMForecaster(**TINY, bags=1)
    data = {"seq": np.arange(10.0)[:, None], "val": np.zeros(10, bool)}
    assert one._bagged(data)[0] is data  # one network: every origin, untouched
    three = LSTMForecaster(**TINY)._bagged(data)  # the default: three networks
    rows = np.sort(np.concatenate([part["seq"][:, 0] for part in three]))
    np.testing.assert_array_equal(rows, np.arange(10.0))  # disjoint, and together every origin
    assert [len(part["seq"]) for part in three] == [4, 3, 3]


def test_fewer_training_origins_than_networks_still_fit() -> None:
    # a series just long enough for one horizon and one day has a single training origin
    short = synthetic_history(hours=H + 24 + 1, seed=5)
    short = short[short["series_id"] == short["series_id"].iloc[0]]
    model = LSTMForecaster(**TINY, bags=3)
    parts = model._bagged({"seq": np.arange(2.0)[:, None], "val": np.zeros(2, bool)})
    assert [len(p["seq"]) for p in parts] == [1, 1]  # two networks of one origin each, none empty
    model.fit(short)
    assert 1 <= len(model.nets_) <= 3
    assert np.isfinite(model.predict(H)["mean"]).all()


def test_a_bagged_model_round_trips_through_the_registry_state(bagged: LSTMForecaster) -> None:
    meta, arrays = to_state(bagged)
    back = from_state(json.loads(json.dumps(meta, allow_nan=False)), arrays)
    np.testing.assert_allclose(back.predict(H)["mean"], bagged.predict(H)["mean"])


@pytest.mark.parametrize("bags", [0, -1, 1.5, True, "3"])
def test_a_bad_bags_is_one_clear_error(bags: Any) -> None:
    with pytest.raises(ForecastInputError, match="LSTM bags"):
        LSTMForecaster(**TINY, bags=bags).fit(HISTORY)


def test_every_bagged_network_trains_on_at_least_one_origin() -> None:
    # on a tiny history most origins validate, and a share can hold validation origins only: such a
    # network would be served untrained (its random weights averaged into the forecast)
    data = {"seq": np.arange(10.0)[:, None], "val": np.array([False] * 3 + [True] * 7)}
    parts = LSTMForecaster(**TINY, bags=10)._bagged(data)
    assert parts and all((~p["val"]).any() for p in parts)
    assert sum(int((~p["val"]).sum()) for p in parts) == 3  # every training origin still used once
