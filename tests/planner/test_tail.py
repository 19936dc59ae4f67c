"""Deserved ahead of forecast demand: the q quantile of the forecast's distribution (planner.tail_quantile)."""

from __future__ import annotations

import itertools
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

from models.frames import ID, TIME
from predictor.config import load_settings
from predictor.errors import ConfigError, InputError
from predictor.planner import PlannerSettings, forecast_targets
from predictor.planner.tail import DEFAULT_TAIL_QUANTILE, TAIL_RANGE, step_quantiles, tail_demand

NOW = pd.Timestamp("2026-11-02T00:00:00Z")
GPU = "nvidia.com/gpu"
Z = NormalDist().inv_cdf


def normal(mean: float, sigma: float, steps: int = 1) -> pd.DataFrame:
    """A forecast whose every step is N(mean, sigma²), written as the five band columns."""
    levels = {"lo-95": 0.025, "lo-80": 0.10, "mean": 0.5, "hi-80": 0.90, "hi-95": 0.975}
    return pd.DataFrame({c: [mean + Z(p) * sigma] * steps for c, p in levels.items()})


def test_a_normal_forecast_gives_its_own_quantiles() -> None:
    f = normal(40.0, 5.0)
    assert step_quantiles(f, 0.9)[0] == pytest.approx(float(f["hi-80"].iloc[0]), abs=1e-9)
    for q in (0.6, 0.8, 0.95, 0.98):  # between bands and beyond hi-95: mean + z·σ
        assert step_quantiles(f, q)[0] == pytest.approx(40.0 + Z(q) * 5.0, abs=1e-6)


def test_the_level_is_monotone_in_q_for_normal_and_skewed_forecasts() -> None:
    skewed = pd.DataFrame({"lo-95": [1.0], "lo-80": [2.0], "mean": [3.0], "hi-80": [9.0], "hi-95": [30.0]})
    crossed = pd.DataFrame({"mean": [10.0], "hi-80": [8.0], "hi-95": [12.0]})  # hi-80 below the mean
    grid = np.linspace(0.51, 0.985, 40)
    for f in (normal(10.0, 3.0), skewed, crossed):
        levels = [step_quantiles(f, q)[0] for q in grid]
        assert all(b >= a - 1e-12 for a, b in itertools.pairwise(levels))
    assert step_quantiles(crossed, 0.9)[0] == 10.0  # crossed bands are made monotone first
    flat = pd.DataFrame({"mean": [7.0], "hi-80": [7.0], "hi-95": [7.0]})  # a forecast with no spread
    assert step_quantiles(flat, 0.95)[0] == 7.0


def test_the_horizon_level_is_the_highest_step() -> None:
    steps = pd.concat([normal(10.0, 2.0), normal(30.0, 1.0), normal(20.0, 8.0)], ignore_index=True)
    assert tail_demand(steps, 0.9) == pytest.approx(max(10 + 2 * Z(0.9), 30 + Z(0.9), 20 + 8 * Z(0.9)))
    assert tail_demand(steps, 0.95) == pytest.approx(20 + 8 * Z(0.95))  # the wide step wins further out
    with pytest.raises(InputError, match="at least two of the forecast columns"):
        step_quantiles(pd.DataFrame({"mean": [1.0]}), 0.9)
    with pytest.raises(InputError, match="missing or infinite"):
        step_quantiles(pd.DataFrame({"mean": [1.0], "hi-80": [float("nan")]}), 0.9)
    with pytest.raises(InputError, match="no forecast step"):
        tail_demand(steps.iloc[:0], 0.9)


@pytest.mark.parametrize("bad", [0.5, 0.99, 1.2, 0.0, -1.0])
def test_the_setting_outside_its_range_is_one_clear_line(tmp_path: Path, bad: float) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text(f"planner:\n  tail_quantile: {bad}\n")
    with pytest.raises(ConfigError) as error:
        load_settings(config)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"invalid setting planner.tail_quantile in {config}: must be between 0.5 and 0.99")
    assert TAIL_RANGE == (0.5, 0.99)
    assert TAIL_RANGE[0] < DEFAULT_TAIL_QUANTILE < TAIL_RANGE[1]


def test_which_setting_sizes_deserved() -> None:
    assert PlannerSettings.model_validate({}).tail_quantile == DEFAULT_TAIL_QUANTILE
    column = PlannerSettings.model_validate({"deserved_quantile": "hi-95"})
    assert column.tail_quantile is None  # an explicit column is not overridden by the default
    assert PlannerSettings.model_validate(column.model_dump()).tail_quantile is None  # and survives a round trip
    assert PlannerSettings.model_validate({"tail_quantile": None}).deserved_quantile == "hi-80"
    both = PlannerSettings.model_validate({"tail_quantile": 0.95, "deserved_quantile": "hi-95"})
    assert both.tail_quantile == 0.95  # given both, the quantile wins
    assert PlannerSettings.model_validate(both.model_dump()).tail_quantile == 0.95


def frame(mean: list[float], sigma: float) -> pd.DataFrame:
    rows = normal(0.0, sigma, len(mean)).add(pd.Series(mean), axis=0)
    rows[ID] = "q"
    rows[TIME] = pd.date_range(NOW, periods=len(mean), freq="h")
    return rows


def test_forecast_targets_size_deserved_at_q_and_say_so() -> None:
    f = frame([20.0, 40.0], sigma=10.0)
    targets = {
        q: forecast_targets(f, PlannerSettings.model_validate({"headroom": 0.0, "tail_quantile": q}), now=NOW)
        for q in (0.8, 0.9, 0.95)
    }
    deserved = {q: t[("q", GPU)].deserved for q, t in targets.items()}
    assert deserved == {0.8: 49.0, 0.9: 53.0, 0.95: 57.0}  # ceil(40 + z·10): 48.4, 52.8, 56.4
    assert "forecast p95 ahead 56.4" in targets[0.95][("q", GPU)].basis
    no_mean = f.drop(columns=["mean"])  # the upper bands suffice: at 0.9 the level is hi-80 itself
    plain = PlannerSettings.model_validate({"headroom": 0.0, "tail_quantile": 0.9})
    assert forecast_targets(no_mean, plain, now=NOW)[("q", GPU)].deserved == 53.0
    column = PlannerSettings.model_validate({"headroom": 0.0, "deserved_quantile": "hi-95"})
    assert forecast_targets(f, column, now=NOW)[("q", GPU)].deserved == 60.0  # ceil(40 + 1.96·10)
    # planner.objective, when set, wins over tail_quantile: the newsvendor's p = 0.5 mixture median.
    both = PlannerSettings.model_validate(
        {"headroom": 0.0, "tail_quantile": 0.95, "objective": {"reclaim_gpu_h": 1, "wait_gpu_h": 1, "idle_gpu_h": 1}}
    )
    target = forecast_targets(f, both, now=NOW)[("q", GPU)]
    assert target.deserved < 32.0 and "forecast newsvendor p=0.50 30.0" in target.basis  # 30 + bisection tolerance
