"""``auto``'s intervals are calibrated on errors as fresh as the forecast they are applied to.

What a user relies on: the LSTM's band is conformalised on the misses of a network trained at the newest
backtest origin (as fresh as the served one), not of one trained weeks before and fed newer histories;
every other member on all of its own backtest windows; each member's band moves by its own misses
before the members are weighted; and the LSTM's narrowing, learnt on another training than the served one, is
scaled down where the served band is narrower than the band it was learnt against (over the same leads,
whatever horizon is asked for), while a widening is served as learnt (a queue idle before its newest window
must not get a band a hundred times its demand, nor a drained one lose the widening its misses asked for),
and a model saved before that rule keeps its shifts as learnt.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from models.forecast import LSTMForecaster, auto, records_for_auto, run_backtest
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
    # the plain pool on every series (its seasonal pool is pinned in test_forecast_decomposition.py)
    model = auto.AutoForecaster(
        windows=WINDOWS, step=STEP, horizon=H, candidate_params={"lstm": TINY_LSTM}, seasonal_pool=()
    )
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
        half = ((mine["hi-80"] - mine["lo-80"]) / 2).groupby(mine["lead"]).mean().sort_index().to_numpy()
        np.testing.assert_allclose(plan.member_halfwidths["lstm"][80], half)  # per lead
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
        windows=WINDOWS,
        step=H,
        horizon=H,
        pool=("lstm", "naive"),
        candidate_params={"lstm": TINY_LSTM},
        seasonal_pool=(),
    ).fit(HISTORY[HISTORY["timestamp"] <= cut])
    replay = records_for_auto(result, outer_windows=1, inner_windows=WINDOWS, rule=fitted.rule())
    replay = replay.sort_values(["series_id", "lead"])
    served = fitted.predict(H).sort_values(["series_id", "timestamp"])
    np.testing.assert_allclose(served["mean"].to_numpy(), replay["mean"].to_numpy(), rtol=1e-6)
    np.testing.assert_allclose(served["hi-80"].to_numpy(), replay["hi-80"].to_numpy(), rtol=1e-5, atol=1e-5)


def test_a_slow_member_narrows_less_on_a_narrower_served_band_and_widens_as_learnt() -> None:
    lead = np.arange(4.0)
    served = {"lstm": (10 + lead, {80: (8 + lead, 12 + lead)})}  # half-width 2
    misses = {"lstm": {80: np.full(50, 5.0)}}  # 5 GPUs outside the calibrating band
    inside = {"lstm": {80: np.full(50, -1.0)}}  # 1 GPU inside it

    def width(scores: dict[str, dict[int, np.ndarray]], calibrating: float | None) -> np.ndarray:
        halves = None if calibrating is None else {"lstm": {80: np.full(4, calibrating)}}
        lo, hi = calibrate_members({"lstm": 1.0}, served, scores, (80,), 1.0, halves)[80]
        return hi - lo

    np.testing.assert_allclose(width(inside, 10.0), 4 - 2 * 1 * 0.2)  # learnt on a band 5x wider: 0.2 a side
    np.testing.assert_allclose(width(inside, None), 4 - 2 * 1)  # no half-widths: 1 GPU a side, as learnt
    np.testing.assert_allclose(width(inside, 1.0), 4 - 2 * 1)  # learnt on a narrower band: not scaled up
    np.testing.assert_allclose(width(misses, 10.0), 4 + 2 * 5)  # a widening is served as learnt
    np.testing.assert_allclose(width(misses, 1e-3), 4 + 2 * 5)  # a degenerate calibrating band changes nothing
    np.testing.assert_allclose(width(inside, np.nan), 4 - 2 * 1)  # unusable half-widths: as learnt
    drained = {"lstm": (lead * 0, {80: (lead * 0, lead * 0)})}  # a served band of zero width still widens
    lo, hi = calibrate_members({"lstm": 1.0}, drained, misses, (80,), 1.0, {"lstm": {80: np.full(4, 10.0)}})[80]
    np.testing.assert_allclose(hi - lo, 10.0)


def test_half_widths_are_read_from_the_windows_the_scores_come_from() -> None:
    records = pd.DataFrame(
        {
            "model": ["lstm"] * 4 + ["naive"],
            "lead": [1, 1, 2, 2, 1],
            "actual": [1.0, 2.0, 1.0, np.nan, 1.0],
            "lo-80": [0.0, 0.0, 0.0, 0.0, 0.0],
            "hi-80": [4.0, 8.0, 6.0, 100.0, 2.0],
        }
    )
    got = member_halfwidths(records, ["lstm"], [80])
    assert set(got) == {"lstm"}
    np.testing.assert_allclose(got["lstm"][80], [3.0, 3.0])  # per lead, the unobserved row left out


H_WAKE = 24  # ≥ 20 scores per series on the LSTM's one window, so its shift applies
WAKE_LSTM: dict[str, Any] = {**TINY_LSTM, "horizon": H_WAKE}


def _waking_history() -> pd.DataFrame:
    """A busy queue, and one idle for nine days that runs ~20 GPUs through the newest backtest window."""
    rng = np.random.default_rng(1)
    n = 240
    start = pd.Timestamp("2026-01-05", tz="UTC")
    stamps = start + pd.to_timedelta(np.arange(n), "h")
    busy = 50 + 10 * np.sin(2 * np.pi * np.arange(n) / 24) + rng.normal(0, 2, n)
    waking = np.zeros(n)
    waking[-H_WAKE:] = 20 + rng.normal(0, 1, H_WAKE)
    return pd.concat(
        [
            pd.DataFrame({"series_id": "busy", "timestamp": stamps, "value": busy}),
            pd.DataFrame({"series_id": "waking", "timestamp": stamps, "value": waking}),
        ],
        ignore_index=True,
    )


@pytest.fixture(scope="module")
def waking() -> auto.AutoForecaster:
    return auto.AutoForecaster(windows=WINDOWS, step=H_WAKE, horizon=H_WAKE, candidate_params={"lstm": WAKE_LSTM}).fit(
        _waking_history()
    )


def test_a_queue_that_wakes_up_gets_a_band_of_its_size(waking: auto.AutoForecaster) -> None:
    served = waking.predict(H_WAKE)
    mine = served[served["series_id"] == "waking"]
    # its LSTM band was calibrated where it was idle (a band a hundredth of a GPU wide): that must not
    # multiply the shift (it served hi-80 ≈ 790 GPUs on a ~20 GPU forecast when it did)
    assert mine["hi-80"].max() < 5 * max(mine["mean"].max(), 1.0)
    assert (mine["hi-95"] >= mine["hi-80"]).all() and (mine["lo-95"] <= mine["lo-80"]).all()


def test_the_band_at_a_lead_does_not_depend_on_the_horizon_asked_for(waking: auto.AutoForecaster) -> None:
    long = waking.predict(H_WAKE).groupby("series_id").head(6).reset_index(drop=True)
    short = waking.predict(6).reset_index(drop=True)  # the loop asks for 25 steps of a 168-step model
    for col in ("lo-80", "hi-80", "lo-95", "hi-95"):
        np.testing.assert_allclose(long[col], short[col], atol=1e-6)


def test_a_model_saved_before_scaled_shifts_serves_its_shifts_as_learnt(waking: auto.AutoForecaster) -> None:
    saved = {sid: (plan.member_scores, plan.member_halfwidths) for sid, plan in waking.states_.items()}
    try:
        for plan in waking.states_.values():
            assert plan.member_scores is not None and plan.member_halfwidths is not None
            # the LSTM's band was too wide everywhere (it narrows), against bands 1,000x wider than served
            scores = {lvl: -np.abs(v) - 1.0 for lvl, v in plan.member_scores["lstm"].items()}
            plan.member_scores = {**plan.member_scores, "lstm": scores}
            wider = {m: {lvl: 1e3 * h for lvl, h in by.items()} for m, by in plan.member_halfwidths.items()}
            plan.member_halfwidths = wider
        scaled = waking.predict(H_WAKE)
        for plan in waking.states_.values():
            del plan.member_halfwidths  # as a state written before the attribute existed loads
        old = waking.predict(H_WAKE)
    finally:
        for sid, plan in waking.states_.items():
            plan.member_scores, plan.member_halfwidths = saved[sid]
    np.testing.assert_allclose(old["mean"], scaled["mean"])
    assert np.isfinite(old["hi-80"]).all()
    # without half-widths the narrowing is served as learnt; scaled, it all but vanished
    assert (old["hi-80"] - old["lo-80"]).sum() < (scaled["hi-80"] - scaled["lo-80"]).sum()
