"""The demand regressor is a plain scikit-learn regressor: every estimator check passes."""

from __future__ import annotations

from typing import Any

import numpy as np
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
