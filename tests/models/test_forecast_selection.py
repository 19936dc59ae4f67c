"""Backtest scoring, metric edge cases, input validation and what ``auto`` promises."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from models.forecast import (
    AutoForecaster,
    ForecastInputError,
    UnknownForecasterError,
    forecasters,
    records_for_auto,
    run_backtest,
    score_records,
    summarize,
)
from models.forecast.metrics import coverage, mase_scale, pinball, smape
from models.forecast.selection import DEFAULT_RULE

H = 48
CANDIDATES = ("naive", "drift", "seasonal_naive_24", "ets")


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(UnknownForecasterError, match="known: auto, drift"):
        forecasters.create("prophet")


def test_metrics_edge_cases() -> None:
    a = np.array([0.0, 0.0, 10.0, np.nan])
    f = np.array([0.0, 5.0, 10.0, 3.0])
    assert smape(a, f) == pytest.approx(200 / 3)  # 0/0 scores 0, the NaN actual is ignored
    assert pinball(np.array([10.0]), np.array([8.0]), 0.9) == pytest.approx(1.8)
    assert coverage(a, f - 1, f + 1) == pytest.approx(2 / 3)
    y = np.arange(400, dtype=float)
    assert mase_scale(y, np.ones(400, bool)) == pytest.approx(168.0)
    assert np.isnan(mase_scale(np.zeros(400), np.ones(400, bool)))


def test_bad_frames_are_input_errors(make_history: Callable[..., pd.DataFrame]) -> None:
    frame = make_history(hours=100)
    with pytest.raises(ForecastInputError, match="duplicate timestamp"):
        forecasters.create("naive").fit(pd.concat([frame, frame.iloc[:1]]))
    off = frame.copy()
    off.loc[3, "timestamp"] += pd.Timedelta(minutes=30)
    with pytest.raises(ForecastInputError, match="not on the"):
        forecasters.create("naive").fit(off)
    with pytest.raises(ForecastInputError, match="needs at least 168"):
        forecasters.create("seasonal_naive_168").fit(frame)
    with pytest.raises(ForecastInputError, match="positive integer"):
        forecasters.create("naive").fit(frame).predict(0)


def test_backtest_never_scores_missing_actuals(make_history: Callable[..., pd.DataFrame]) -> None:
    frame = make_history(hours=400)
    last = frame["timestamp"].max()
    hole = (frame["series_id"] == "busy-b") & (frame["timestamp"] > last - pd.Timedelta(hours=10))
    result = run_backtest(frame[~hole], {"naive": forecasters.create("naive")}, horizon=H, windows=2, step=H)
    recs = result.records
    newest_b = recs[(recs["series_id"] == "busy-b") & (recs["window"] == 0)]
    # busy-b now ends 10 h earlier, so its window-0 cut moves with it: every actual is observed
    assert newest_b["actual"].notna().all()
    metrics = result.metrics()
    assert set(metrics["window"]) == {0, 1}
    assert (metrics["n"] <= H).all()
    gap_frame = frame.drop(frame.index[(frame["series_id"] == "busy-a")][-20:-15])
    recs = run_backtest(gap_frame, {"naive": forecasters.create("naive")}, horizon=H, windows=1, step=H).records
    assert recs.loc[recs["series_id"] == "busy-a", "actual"].isna().sum() == 5


def test_auto_serves_its_pool_unless_an_option_beats_it_by_the_margin(
    make_history: Callable[..., pd.DataFrame],
) -> None:
    frame = make_history(hours=504)
    pool = ("naive", "window_mean_168")
    candidates = (*CANDIDATES, "window_mean_168")
    for margin in (0.0, 1.0):
        auto = AutoForecaster(candidates=candidates, windows=3, horizon=H, step=H, pool=pool, margin=margin).fit(frame)
        for plan in auto.states_.values():
            if margin == 1.0:  # nothing beats the pool by 100 %: the pool is always served
                assert set(plan.weights) == set(pool) and np.allclose(list(plan.weights.values()), 0.5)
            else:  # no margin: whatever scored lowest, pool included
                singles = [plan.scores[m] for m in candidates if m in plan.scores]
                assert plan.scores[plan.choice] <= min(singles) + 1e-9


def test_cached_auto_replay_equals_fitting_auto_at_that_origin(make_history: Callable[..., pd.DataFrame]) -> None:
    frame = make_history(hours=504)
    models = {m: forecasters.create(m) for m in CANDIDATES}
    result = run_backtest(frame, models, horizon=H, windows=4, step=H)
    replay = records_for_auto(result, outer_windows=1, inner_windows=3, history=frame)
    cut = frame.groupby("series_id")["timestamp"].transform("max") - pd.Timedelta(hours=H)
    auto = AutoForecaster(candidates=CANDIDATES, windows=3, horizon=H, step=H).fit(frame[frame["timestamp"] <= cut])
    served = auto.predict(H).sort_values(["series_id", "timestamp"]).reset_index(drop=True)
    replay = replay.sort_values(["series_id", "timestamp"]).reset_index(drop=True)
    np.testing.assert_allclose(served["mean"], replay["mean"])
    np.testing.assert_allclose(served["hi-80"], replay["hi-80"])


@pytest.mark.slow
def test_auto_intervals_are_calibrated_on_stationary_noise() -> None:
    rng = np.random.default_rng(3)
    t = pd.date_range("2026-01-01", periods=24 * 42, freq="1h", tz="UTC")
    frame = pd.concat(
        pd.DataFrame({"series_id": f"s{i}", "timestamp": t, "value": 50 + rng.normal(0, 5, t.size)}) for i in range(3)
    )
    models = {m: forecasters.create(m) for m in CANDIDATES}
    result = run_backtest(frame, models, horizon=H, windows=8, step=H)
    # gamma 1: plain two-sided CQR, calibrated when windows are exchangeable (the default gamma < 1 widens
    # for the level shifts real traces have and stationary noise does not)
    replay = records_for_auto(result, outer_windows=4, inner_windows=4, rule=replace(DEFAULT_RULE, gamma=1.0))
    metrics = summarize(score_records(replay, result.scales, (80, 95)).assign(series_id="all"), by=("model",))
    assert 0.7 <= float(metrics["coverage_80"].iloc[0]) <= 0.92
    assert 0.85 <= float(metrics["coverage_95"].iloc[0]) <= 1.0


def test_auto_on_a_short_series_says_what_it_left_out(make_history: Callable[..., pd.DataFrame]) -> None:
    frame = make_history(hours=336)  # two weeks
    auto = AutoForecaster(candidates=("naive", "seasonal_naive_168", "mstl"), windows=3).fit(frame)
    assert auto.predict(168).groupby("series_id").size().eq(168).all()
    assert "busy-a" in auto.notes_
    tiny = make_history(hours=30)
    auto = AutoForecaster(candidates=("naive", "ets"), windows=3).fit(tiny)
    assert "too short to backtest" in auto.notes_["busy-a"]
    assert len(auto.predict(168)) == 3 * 168
