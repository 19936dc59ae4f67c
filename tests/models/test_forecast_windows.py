"""Window-average baselines and the regularised choice of ``auto`` (``models.forecast.selection``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models.forecast import AutoForecaster, forecasters
from models.forecast.selection import SelectionRule, choose, cqr_shift


def _frame(values: np.ndarray) -> pd.DataFrame:
    t = pd.date_range("2026-03-02", periods=values.size, freq="h", tz="UTC")
    return pd.DataFrame({"series_id": "q", "timestamp": t, "value": values})


def test_window_means_forecast_the_mean_of_the_last_day_or_week() -> None:
    values = np.arange(24 * 14, dtype=float)
    for name, window in (("window_mean_24", 24), ("window_mean_168", 168)):
        out = forecasters.create(name).fit(_frame(values)).predict(48)
        np.testing.assert_allclose(out["mean"], values[-window:].mean())


def test_seasonal_mean_repeats_the_average_day_of_the_last_week() -> None:
    rng = np.random.default_rng(0)
    values = 50 + 10 * np.sin(2 * np.pi * np.arange(24 * 10) / 24) + rng.normal(0, 1, 24 * 10)
    out = forecasters.create("seasonal_mean_24").fit(_frame(values)).predict(48)
    profile = values[-7 * 24 :].reshape(7, 24).mean(axis=0)
    np.testing.assert_allclose(out["mean"], np.tile(profile, 2))


def test_seasonal_median_forecast_ignores_drains_that_move_the_mean() -> None:
    rng = np.random.default_rng(0)
    values = 50 + 10 * np.sin(2 * np.pi * np.arange(24 * 10) / 24) + rng.normal(0, 1, 24 * 10)
    clean = values[-7 * 24 :].reshape(7, 24)
    drained = values.copy()
    drained[-5 * 24 : -3 * 24] *= 0.05  # two of the last seven days drained to near zero
    median = forecasters.create("seasonal_median_24").fit(_frame(drained)).predict(24)
    mean = forecasters.create("seasonal_mean_24").fit(_frame(drained)).predict(24)
    truth = clean.mean(axis=0)
    np.testing.assert_allclose(median["mean"], np.median(drained[-7 * 24 :].reshape(7, 24), axis=0))
    assert np.abs(median["mean"].to_numpy() - truth).max() < 3  # within the noise of the clean days
    assert np.abs(mean["mean"].to_numpy() - truth).min() > 10  # two drained days pull every hour's mean down
    assert (median["lo-80"] <= median["mean"]).all() and (median["mean"] <= median["hi-80"]).all()


def test_auto_serves_the_pool_on_thin_or_unconvincing_evidence() -> None:
    rng = np.random.default_rng(1)
    actual = rng.normal(10, 1, (2, 24))
    preds = {"a": actual + 1.0, "b": actual + 1.05, "c": actual + 0.95}
    rule = SelectionRule(pool=("a", "b"), margin=0.1, min_windows=3)
    assert choose(preds, actual, rule) == ("pool", {"a": 0.5, "b": 0.5})  # 2 windows < min_windows
    rule = SelectionRule(pool=("a", "c"), margin=0.1, min_windows=1)
    label, _ = choose(preds, actual, rule)
    assert label == "pool"  # every option is ≈ 1 GPU off: nothing beats the pool by 10 %
    rule = SelectionRule(pool=("a", "b"), margin=0.1, min_windows=1, ensemble_sizes=())
    preds["d"] = actual + 0.1
    assert choose(preds, actual, rule) == ("d", {"d": 1.0})  # 0.1 against the pool's 1.0: a clear winner


def test_conformal_step_is_two_sided() -> None:
    too_wide = -np.abs(np.random.default_rng(2).normal(5, 1, 200))  # every actual well inside the band
    too_narrow = -too_wide
    narrow_shift, wide_shift = cqr_shift(too_narrow, 80, 1.0), cqr_shift(too_wide, 80, 1.0)
    assert narrow_shift is not None and narrow_shift > 0  # bands that missed move out
    assert wide_shift is not None and wide_shift < 0  # bands that were too wide move in
    assert cqr_shift(too_wide[:5], 80, 1.0) is None  # too few scores: leave the band alone


def test_a_weighted_pool_keeps_its_weights_over_the_members_that_can_run() -> None:
    rng = np.random.default_rng(4)
    actual = rng.normal(10, 1, (3, 24))
    preds = {"a": actual + 1.0, "b": actual - 1.0}
    rule = SelectionRule(pool=("c", "a", "b"), weights=(0.6, 0.3, 0.1), margin=1.0)
    # "c" could not run on this series: the others keep their 3:1 ratio
    assert choose(preds, actual, rule) == ("pool", {"a": pytest.approx(0.75), "b": pytest.approx(0.25)})
    with pytest.raises(ValueError, match="one non-negative number per pool member"):
        SelectionRule(pool=("a", "b"), weights=(1.0,))


def test_auto_serves_the_weighted_pool_it_was_given() -> None:
    rng = np.random.default_rng(5)
    values = 50 + rng.normal(0, 2, 24 * 21)
    auto = AutoForecaster(
        candidates=("naive", "window_mean_24"), pool=("naive", "window_mean_24"), pool_weights=(0.25, 0.75)
    ).fit(_frame(values))
    out = auto.predict(48)
    expected = 0.25 * values[-1] + 0.75 * values[-24:].mean()
    np.testing.assert_allclose(out["mean"], expected)
    assert auto.rule().weights == (0.25, 0.75)
