"""An LSTM can start from a network pre-trained on other histories (``init_state``).

What a user relies on: the weights handed over are the ones training starts from (with no epochs to run,
the warm-started model serves exactly what the pre-trained one serves on the same history), a fine-tune
runs from them like any fit, and weights of another shape fail as one error naming ``init_state``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from models.forecast import LSTMForecaster
from models.forecast.prep import ForecastInputError
from tests.models.conftest import synthetic_history

H = 12
TINY: dict[str, Any] = {"horizon": H, "lookback_days": 2, "hidden_size": 4, "max_epochs": 2}
OTHER = synthetic_history(hours=360, seed=1).assign(series_id=lambda f: "other/" + f["series_id"])
# within the pre-trained scales: a larger queue would be served at the nearest trained scale, which a
# network fitted on OWN itself would not clip
OWN = synthetic_history(hours=300, seed=2).assign(value=lambda f: 0.9 * f["value"])


@pytest.fixture(scope="module")
def pretrained() -> LSTMForecaster:
    # one network: its weights are what a warm start transfers (every bag of the warm model starts from them)
    return LSTMForecaster(**TINY, bags=1).fit(OTHER)


def test_a_warm_start_begins_from_the_pretrained_weights(pretrained: LSTMForecaster) -> None:
    warm = LSTMForecaster(**{**TINY, "max_epochs": 0}, init_state=pretrained.net_.state_dict()).fit(OWN)
    pd.testing.assert_frame_equal(warm.predict(H), pretrained.update(OWN).predict(H))


def test_a_fine_tune_moves_away_from_them_leaving_the_pretrained_network_as_it_was(
    pretrained: LSTMForecaster,
) -> None:
    before = {k: v.clone() for k, v in pretrained.net_.state_dict().items()}
    model = LSTMForecaster(**TINY, init_state=pretrained.net_.state_dict())
    first, again = clone(model).fit(OWN).predict(H), clone(model).fit(OWN).predict(H)
    pd.testing.assert_frame_equal(first, again)  # reproducible
    assert not np.allclose(first["mean"], pretrained.update(OWN).predict(H)["mean"])
    assert all(v.equal(before[k]) for k, v in pretrained.net_.state_dict().items())


def test_weights_of_another_shape_name_init_state(pretrained: LSTMForecaster) -> None:
    with pytest.raises(ForecastInputError, match="init_state"):
        LSTMForecaster(**{**TINY, "hidden_size": 8}, init_state=pretrained.net_.state_dict()).fit(OWN)
