"""``level_profile`` and the daily-cycle gate ``auto`` serves it behind.

What a user relies on: on a queue with a daily and weekly rhythm the decomposition forecasts that rhythm at
the queue's current level (and its bands cover about what they say); the strength of the daily cycle is one
scale-free number, high for a rhythm and low for a wandering series; ``auto`` serves its seasonal pool only
to the series whose cycle is strong (and never to one it cannot judge), and the pipeline's replay of ``auto``
makes the same choice; bad settings are refused by name.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models.forecast import AutoForecaster, ForecastInputError, forecasters, records_for_auto, run_backtest
from models.forecast.decomposition import daily_strength

START = pd.Timestamp("2026-01-05 00:00", tz="UTC")  # a Monday


def _rhythm(days: int, level: float = 100.0, noise: float = 0.0, seed: int = 0) -> np.ndarray:
    """level × a daily cycle × 0.8 on weekends × (1 + AR(1) noise)."""
    t = np.arange(days * 24)
    daily = 1 + 0.3 * np.sin(2 * np.pi * t / 24)
    weekend = np.where((t // 24) % 7 >= 5, 0.8, 1.0)
    rng = np.random.default_rng(seed)
    ar = np.zeros(t.size)
    for k in range(1, t.size):
        ar[k] = 0.8 * ar[k - 1] + rng.normal(0, noise)
    return level * daily * weekend * (1 + ar)


def _frame(**series: np.ndarray) -> pd.DataFrame:
    return pd.concat(
        pd.DataFrame({"series_id": sid, "timestamp": START + pd.to_timedelta(np.arange(v.size), "h"), "value": v})
        for sid, v in series.items()
    )


def test_level_profile_forecasts_the_daily_and_weekend_rhythm_at_the_current_level() -> None:
    days = 35
    truth = _rhythm(days + 7, level=100.0)
    history = truth[: days * 24].copy()
    history[-7 * 24 :] *= 1.5  # demand grew by half a week ago: the forecast follows the new level
    history[400:430] = 0.0  # a drain inside the profile window moves nothing
    out = forecasters.create("level_profile").fit(_frame(q=history)).predict(168)
    expected = 1.5 * truth[days * 24 :]
    assert np.abs(out["mean"].to_numpy() - expected).max() < 0.03 * expected.max()
    weekend = out["timestamp"].dt.day_of_week.to_numpy() >= 5
    ratio = out["mean"].to_numpy()[weekend].mean() / out["mean"].to_numpy()[~weekend].mean()
    assert ratio == pytest.approx(0.8, abs=0.03)


def test_level_profile_bands_cover_about_what_they_say_on_noisy_rhythm() -> None:
    covered = {80: [], 95: []}
    for seed in range(6):
        values = _rhythm(49, noise=0.03, seed=seed)
        fitted = forecasters.create("level_profile").fit(_frame(q=values[: 42 * 24]))
        out = fitted.predict(168, level=(80, 95))
        actual = values[42 * 24 :]
        for level in covered:
            covered[level].append(np.mean((actual >= out[f"lo-{level}"]) & (actual <= out[f"hi-{level}"])))
    assert 0.65 <= float(np.mean(covered[80])) <= 0.93
    assert 0.85 <= float(np.mean(covered[95])) <= 1.0
    assert float(np.mean(covered[95])) > float(np.mean(covered[80]))


def test_level_profile_refuses_what_it_cannot_forecast() -> None:
    values = _rhythm(20)
    with pytest.raises(ForecastInputError, match="divides a day"):
        forecasters.create("level_profile", freq="7h").fit(
            pd.DataFrame({"series_id": "q", "timestamp": START + pd.to_timedelta(np.arange(60) * 7, "h"), "value": 1.0})
        )
    with pytest.raises(ForecastInputError, match="level_days"):
        forecasters.create("level_profile", level_days=30).fit(_frame(q=values))
    with pytest.raises(ForecastInputError):  # 10 days of history: fewer than the 14 it needs
        forecasters.create("level_profile").fit(_frame(q=values[: 10 * 24]))


def test_daily_strength_is_high_for_a_rhythm_low_for_a_wandering_series_and_scale_free() -> None:
    rhythm = _rhythm(14, noise=0.01)
    walk = 100 + np.cumsum(np.random.default_rng(1).normal(0, 2, 14 * 24))
    assert daily_strength(rhythm, 24) > 0.8
    assert daily_strength(walk, 24) < 0.2
    assert daily_strength(rhythm * 1000, 24) == pytest.approx(daily_strength(rhythm, 24))
    assert np.isnan(daily_strength(rhythm[:48], 24))  # under three days: unknown, not weak
    assert daily_strength(np.zeros(14 * 24), 24) == 0.0


def _gated_auto() -> AutoForecaster:
    # the default gate with fast members, so the test needs no network
    return AutoForecaster(
        candidates=("naive", "drift", "level_profile"),
        pool=("naive", "drift"),
        seasonal_pool=("naive", "level_profile"),
        windows=2,
        horizon=48,
        step=48,
    )


def test_auto_serves_its_seasonal_pool_only_where_the_daily_cycle_is_strong() -> None:
    days = 30
    walk = 100 + np.cumsum(np.random.default_rng(2).normal(0, 2, days * 24))
    frame = _frame(rhythm=_rhythm(days, noise=0.02), walk=walk, young=_rhythm(10, noise=0.02))
    fitted = _gated_auto().fit(frame)
    assert set(fitted.states_["rhythm"].weights) == {"naive", "level_profile"}
    assert set(fitted.states_["walk"].weights) == {"naive", "drift"}
    assert set(fitted.states_["young"].weights) == {"naive", "drift"}  # 10 days: too short to judge
    plain = AutoForecaster(candidates=("naive", "drift"), pool=("naive", "drift"), windows=2, horizon=48, step=48)
    assert plain.rule().seasonal_pool == ()  # its members are not candidates: the plain pool everywhere
    assert set(plain.fit(frame).states_["rhythm"].weights) == {"naive", "drift"}


def test_the_pipeline_replay_of_auto_gates_each_series_as_auto_does() -> None:
    days, h = 30, 48
    walk = 100 + np.cumsum(np.random.default_rng(3).normal(0, 2, days * 24))
    frame = _frame(rhythm=_rhythm(days, noise=0.02), walk=walk)
    model = _gated_auto()
    result = run_backtest(frame, model.make_candidates(), horizon=h, windows=3, step=h)
    replay = records_for_auto(result, outer_windows=1, inner_windows=2, rule=model.rule(), history=frame)
    cut = frame.groupby("series_id")["timestamp"].transform("max") - pd.Timedelta(hours=h)
    served = model.fit(frame[frame["timestamp"] <= cut]).predict(h).sort_values(["series_id", "timestamp"])
    replay = replay.sort_values(["series_id", "timestamp"])
    assert dict(zip(replay["series_id"], replay["choice"], strict=False))["rhythm"].startswith("pool(naive")
    assert "level_profile" in dict(zip(replay["series_id"], replay["choice"], strict=False))["rhythm"]
    np.testing.assert_allclose(served["mean"].to_numpy(), replay["mean"].to_numpy(), rtol=1e-9)
    np.testing.assert_allclose(served["hi-80"].to_numpy(), replay["hi-80"].to_numpy(), rtol=1e-9)
    without = records_for_auto(result, outer_windows=1, inner_windows=2, rule=model.rule())  # no history: ungated
    assert "level_profile" not in set(without["choice"])


def test_a_band_does_not_depend_on_the_horizon_and_a_short_series_gets_replayed_bands() -> None:
    for days in (14, 28):
        fitted = forecasters.create("level_profile").fit(_frame(q=_rhythm(days, noise=0.02)))
        widths = [float((o["hi-80"] - o["lo-80"]).iloc[0]) for o in (fitted.predict(h) for h in (1, 4, 48, 168))]
        assert widths == pytest.approx([widths[0]] * 4)
        assert widths[0] < 0.5 * float(np.ptp(_rhythm(days)))  # not the whole daily swing (the no-evidence fallback)


def test_level_profile_reads_hours_on_the_teams_clock_across_a_dst_change() -> None:
    stamps = pd.date_range("2026-02-20", periods=49 * 24, freq="1h", tz="UTC")
    local = stamps.tz_convert("Europe/Berlin")
    busy = (local.hour >= 9) & (local.hour < 17)
    values = np.asarray(10 + 90 * busy * np.where(local.day_of_week >= 5, 0.6, 1.0), float)
    frame = pd.DataFrame({"series_id": "q", "timestamp": stamps, "value": values})
    cut = 42 * 24  # five days after the change to summer time
    errors = {}
    for tz in ("UTC", "Europe/Berlin"):
        out = forecasters.create("level_profile", tz=tz).fit(frame.iloc[:cut]).predict(168)
        errors[tz] = float(np.abs(out["mean"].to_numpy() - values[cut:]).mean())
    assert errors["Europe/Berlin"] < 0.5 * errors["UTC"]
    with pytest.raises(ForecastInputError, match="time zone"):
        forecasters.create("level_profile", tz="Mars/Olympus").fit(frame)


def test_daily_strength_keeps_a_gap_in_its_place_and_refuses_a_day_of_one_step() -> None:
    rhythm = _rhythm(14, noise=0.01)
    gappy = rhythm.copy()
    gappy[100:112] = np.nan
    assert daily_strength(gappy, 24) == pytest.approx(daily_strength(rhythm, 24), abs=0.05)
    with pytest.raises(ForecastInputError):
        daily_strength(rhythm, 0)


def test_auto_refuses_bad_gate_settings_and_runs_on_a_grid_with_no_daily_profile() -> None:
    frame = _frame(q=_rhythm(30, noise=0.02))
    for bad in ({"seasonal_from": 2.0}, {"seasonal_pool": "level_profile"}, {"seasonal_weights": (1.0,)}):
        with pytest.raises(ForecastInputError):
            AutoForecaster(**{**_gated_auto().get_params(), **bad}).fit(frame)
    daily = pd.DataFrame(
        {"series_id": "q", "timestamp": START + pd.to_timedelta(np.arange(400), "D"), "value": 50 + np.arange(400.0)}
    )
    gated = AutoForecaster(**{**_gated_auto().get_params(), "horizon": 7, "step": 7, "freq": "1D"}).fit(daily)
    assert gated.choices_["q"].startswith("pool(naive") and "q" not in gated.notes_  # level_profile left out


def test_a_young_seasonal_series_keeps_the_plain_pool_until_its_members_have_a_backtest() -> None:
    fitted = _gated_auto().fit(_frame(q=_rhythm(15, noise=0.02)))  # gated, but level_profile has no backtest yet
    assert set(fitted.states_["q"].weights) == {"naive", "drift"}
