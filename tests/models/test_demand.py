"""The demand regressor is a plain scikit-learn regressor: every estimator check passes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from models.demand import DemandRegressor, krr_rule, provisioning_metrics, round_up_to_sizes, vpa_rule


@parametrize_with_checks([DemandRegressor(max_iter=20)])
def test_sklearn_contract(estimator: Any, check: Any) -> None:
    check(estimator)


def test_quantile_is_respected_and_clone_keeps_params() -> None:
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (2000, 2))
    y = X[:, 0] + rng.normal(0, 0.1, 2000)
    model = DemandRegressor(quantile=0.9).fit(X, y)
    coverage = float(np.mean(y <= model.predict(X)))
    assert 0.85 < coverage < 0.95
    assert clone(model).get_params()["quantile"] == 0.9


def test_bad_quantile_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="quantile"):
        DemandRegressor(quantile=1.5).fit(np.ones((30, 1)), np.ones(30))


def test_rules_and_rounding() -> None:
    assert vpa_rule([1, 2, 3, 4, 10]) == pytest.approx(np.percentile([1, 2, 3, 4, 10], 90) * 1.15)
    assert krr_rule([1, 2, 3]) == pytest.approx(3.45)
    assert np.isnan(vpa_rule([]))
    assert round_up_to_sizes(np.array([0.1, 0.3, 0.9, 1.2, 3.0])).tolist() == [1, 1, 1, 2, 3]
    assert round_up_to_sizes(np.array([0.1, 0.3, 0.9, 1.2]), (0.25, 0.5)).tolist() == [0.25, 0.5, 1, 2]


def test_provisioning_metrics() -> None:
    m = provisioning_metrics(np.array([1.0, 2.0]), np.array([2.0, 1.0]), np.array([1.0, 1.0]), np.array([4.0, 4.0]))
    assert m["slack"] == pytest.approx(0.0)
    assert m["under"] == pytest.approx(0.5)
    assert m["freed"] == pytest.approx(5.0)


def test_serving_features_of_the_newest_hour_equal_the_training_features() -> None:
    """``latest_queue_features`` (column reductions, for a thousand queues per cycle) gives exactly the newest
    row of ``queue_features(serving=True)`` (per-series rolling windows, what training sees)."""
    from models.demand_features import QUEUE_FEATURES, latest_queue_features, queue_features
    from models.demand_queue import hourly_wide

    rng = np.random.default_rng(5)
    stamps = pd.date_range("2026-01-05", periods=24 * 9, freq="h", tz="UTC")
    frame = pd.concat(
        [
            pd.DataFrame(
                {
                    "series_id": q,
                    "timestamp": stamps,
                    "demand": rng.gamma(2, 4, len(stamps)),
                    "pending": rng.integers(0, 5, len(stamps)).astype(float),
                }
            )
            for q in ("a", "b", "c")
        ]
    )
    slow = queue_features(frame, pending="pending", serving=True).groupby("series_id").tail(1)
    fast = latest_queue_features(hourly_wide(frame, "demand"), hourly_wide(frame, "pending"))
    columns = [*QUEUE_FEATURES, "scale"]
    np.testing.assert_allclose(fast[columns].to_numpy(float), slow[columns].to_numpy(float), rtol=1e-12, equal_nan=True)
    assert fast["series_id"].tolist() == ["a", "b", "c"]
    # A queue with a hole longer than three hours in its last week has no complete week: NaN, not a guess.
    holed = frame[~((frame["series_id"] == "b") & frame["timestamp"].between(stamps[-50], stamps[-45]))]
    again = latest_queue_features(hourly_wide(holed, "demand"))
    assert np.isnan(again.set_index("series_id").loc["b", "max168"])
    assert np.isfinite(again.set_index("series_id").loc["a", "max168"])
