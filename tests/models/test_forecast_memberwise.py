"""``auto``'s intervals are calibrated on errors as fresh as the forecast they are applied to.

What a user relies on: the LSTM's band is conformalised on the misses of a network trained at the newest
backtest origin (as fresh as the served one), not of one trained weeks before and fed newer histories;
every other member on all of its own backtest windows; each member's band moves by its own misses
before the members are weighted; and the LSTM's misses, made by another training than the served one, move
its band in proportion to that band (a miss of half the calibrating band's width widens the served band by
half its own), while a model saved before that rule keeps its absolute shifts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from models.forecast import LSTMForecaster, auto, run_backtest
from models.forecast.memberwise import calibrate_members, member_halfwidths
from tests.models.conftest import synthetic_history

H, STEP, WINDOWS = 12, 24, 3
TINY_LSTM: dict[str, Any] = {"horizon": H, "lookback_days": 2, "hidden_size": 4, "max_epochs": 2}
HISTORY = synthetic_history(hours=360)


def _scores(records: Any, level: int) -> np.ndarray:
    rows = records[records["actual"].notna()]
    y = rows["actual"].to_numpy(float)
    return np.maximum(rows[f"lo-{level}"].to_numpy(float) - y, y - rows[f"hi-{level}"].to_numpy(float))


def test_the_lstm_is_calibrated_on_the_newest_window_by_a_network_trained_there() -> None:
    model = auto.AutoForecaster(windows=WINDOWS, step=STEP, horizon=H, candidate_params={"lstm": TINY_LSTM})
    model.fit(HISTORY)
    fresh = run_backtest(
        HISTORY, {"lstm": LSTMForecaster(**TINY_LSTM)}, horizon=H, windows=1, step=STEP, level=auto.CALIBRATED_LEVELS
    ).records
    baselines = run_backtest(
        HISTORY, {"naive": auto.forecasters.create("naive")}, horizon=H, windows=WINDOWS, step=STEP, level=(80,)
    ).records
    for sid in ("busy-a", "busy-b"):
        plan = model.states_[sid]
        assert plan.member_scores is not None and set(plan.member_scores) == set(plan.weights)
        for level in (80, 95):  # the newest window's misses of a network fitted at its origin, and only those
            want = _scores(fresh[fresh["series_id"] == sid], level)
            np.testing.assert_allclose(plan.member_scores["lstm"][level], want, rtol=1e-6, atol=1e-6)
        # the LSTM's shift is learnt relative to the band it was calibrated on; a baseline's is absolute
        assert plan.member_halfwidths is not None and set(plan.member_halfwidths) == {"lstm"}
        mine = fresh[(fresh["series_id"] == sid) & fresh["actual"].notna()]
        half = float(np.mean(mine["hi-80"] - mine["lo-80"]) / 2)
        assert plan.member_halfwidths["lstm"][80] == pytest.approx(half)
        # a baseline is refit at every origin: every backtest window is fresh, and all of them count
        want = _scores(baselines[baselines["series_id"] == sid], 80)
        np.testing.assert_allclose(plan.member_scores["naive"][80], want)
        assert plan.windows == WINDOWS  # no note that the backtest was short
        assert sid not in model.notes_


def test_each_member_band_moves_by_its_own_misses_before_weighting() -> None:
    lead = np.arange(4.0)
    members = {
        "narrow": (10 + lead, {80: (9 + lead, 11 + lead)}),  # missed by 3 every time
        "wide": (10 + lead, {80: (0 + lead, 20 + lead)}),  # 7 inside on both sides every time
    }
    scores = {"narrow": {80: np.full(50, 3.0)}, "wide": {80: np.full(50, -7.0)}}
    weights = {"narrow": 0.75, "wide": 0.25}
    lo, hi = calibrate_members(weights, members, scores, (80,), gamma=1.0)[80]
    np.testing.assert_allclose(lo, 0.75 * (6 + lead) + 0.25 * (7 + lead))
    np.testing.assert_allclose(hi, 0.75 * (14 + lead) + 0.25 * (13 + lead))
    # too few misses to learn from: that member's band is served as it came
    lo, _ = calibrate_members(weights, members, {"narrow": {80: np.full(5, 3.0)}}, (80,), gamma=1.0)[80]
    assert lo == pytest.approx(0.75 * (9 + lead) + 0.25 * lead)


def test_the_pipeline_replay_of_auto_calibrates_the_lstm_as_auto_does() -> None:
    # ``predictor backtest --model auto`` replays auto from one long backtest that fits the LSTM at every
    # origin; it must serve the bands auto itself would, which use only the newest inner window's network
    members = {"lstm": LSTMForecaster(**TINY_LSTM), "naive": auto.forecasters.create("naive")}
    result = run_backtest(HISTORY, members, horizon=H, windows=WINDOWS + 1, step=H)
    cut = HISTORY.groupby("series_id")["timestamp"].transform("max") - pd.Timedelta(hours=H)
    fitted = auto.AutoForecaster(
        windows=WINDOWS, step=H, horizon=H, pool=("lstm", "naive"), candidate_params={"lstm": TINY_LSTM}
    ).fit(HISTORY[HISTORY["timestamp"] <= cut])
    replay = auto.records_for_auto(result, outer_windows=1, inner_windows=WINDOWS, rule=fitted.rule())
    replay = replay.sort_values(["series_id", "lead"])
    served = fitted.predict(H).sort_values(["series_id", "timestamp"])
    np.testing.assert_allclose(served["mean"].to_numpy(), replay["mean"].to_numpy(), rtol=1e-6)
    np.testing.assert_allclose(served["hi-80"].to_numpy(), replay["hi-80"].to_numpy(), rtol=1e-5, atol=1e-5)


def test_a_slow_member_moves_in_proportion_to_its_band() -> None:
    lead = np.arange(4.0)
    served = {"lstm": (10 + lead, {80: (8 + lead, 12 + lead)})}  # half-width 2
    scores = {"lstm": {80: np.full(50, 5.0)}}  # missed by 5 outside a calibrating band of half-width 10
    lo, hi = calibrate_members({"lstm": 1.0}, served, scores, (80,), 1.0, {"lstm": {80: 10.0}})[80]
    np.testing.assert_allclose(hi - lo, 4 + 2 * 0.5 * 2)  # widened by half its half-width on each side
    lo, hi = calibrate_members({"lstm": 1.0}, served, scores, (80,), 1.0)[80]
    np.testing.assert_allclose(hi - lo, 4 + 2 * 5)  # without a half-width: absolute, 5 GPUs a side
    # inside by half the calibrating band: narrowed by half of the served band's half-width
    inside = {"lstm": {80: np.full(50, -5.0)}}
    lo, hi = calibrate_members({"lstm": 1.0}, served, inside, (80,), 1.0, {"lstm": {80: 10.0}})[80]
    np.testing.assert_allclose(hi - lo, 2.0)


def test_half_widths_are_read_from_the_windows_the_scores_come_from() -> None:
    records = pd.DataFrame(
        {
            "model": ["lstm"] * 3 + ["naive"],
            "actual": [1.0, 2.0, np.nan, 1.0],
            "lo-80": [0.0, 0.0, 0.0, 0.0],
            "hi-80": [4.0, 8.0, 100.0, 2.0],
        }
    )
    assert member_halfwidths(records, ["lstm"], [80]) == {"lstm": {80: 3.0}}  # unobserved row left out


def test_a_model_saved_before_relative_shifts_serves_absolute_ones() -> None:
    model = auto.AutoForecaster(windows=WINDOWS, step=STEP, horizon=H, candidate_params={"lstm": TINY_LSTM})
    model.fit(HISTORY)
    new = model.predict(H)
    for plan in model.states_.values():
        del plan.member_halfwidths  # as a state written before the attribute existed loads
    old = model.predict(H)
    np.testing.assert_allclose(old["mean"], new["mean"])
    assert np.isfinite(old["hi-80"]).all()
