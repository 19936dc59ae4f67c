"""The planner's objective: deserved and guarantee are the newsvendor optimum of the forecast distribution."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models.frames import ID, TIME
from predictor.errors import InputError
from predictor.planner import PlannerSettings, forecast_targets
from predictor.planner.objective import BAND_LEVELS, Objective, critical_ratio, mixture_quantile

NOW = pd.Timestamp("2026-11-02T00:00:00Z")
BANDS = list(BAND_LEVELS)


def rows(*values: tuple[float, float, float, float, float]) -> pd.DataFrame:
    return pd.DataFrame(list(values), columns=BANDS)


def test_the_level_is_the_critical_ratio_of_the_costs() -> None:
    assert critical_ratio(4.0, 1.0) == 0.8
    objective = Objective(reclaim_gpu_h=9.0, wait_gpu_h=1.0, idle_gpu_h=1.0)
    assert (objective.deserved_level, objective.guarantee_level) == (0.9, 0.5)


def test_one_step_reads_its_bands_and_interpolates_between_them() -> None:
    one = rows((0.0, 10.0, 50.0, 90.0, 100.0))
    assert mixture_quantile(one, 0.5) == pytest.approx(50.0, abs=1e-5)
    assert mixture_quantile(one, 0.9) == pytest.approx(90.0, abs=1e-5)
    assert mixture_quantile(one, 0.7) == pytest.approx(70.0, abs=1e-5)  # 0.5 + 0.4 × (70 − 50) / 40


def test_several_steps_give_the_quantile_of_their_mixture() -> None:
    steps = pd.DataFrame({"lo-80": [0.0, 40.0], "hi-80": [40.0, 80.0]})
    assert mixture_quantile(steps, 0.5) == pytest.approx(40.0, abs=1e-5)  # F = (0.9 + 0.1) / 2
    flat = rows((10.0,) * 5, (30.0,) * 5)
    assert mixture_quantile(flat, 0.5) == pytest.approx(10.0, abs=1e-5)
    assert mixture_quantile(flat, 0.6) == pytest.approx(30.0, abs=1e-5)
    with pytest.raises(InputError, match="at least two of the forecast columns"):
        mixture_quantile(pd.DataFrame({"mean": [1.0]}), 0.5)
    with pytest.raises(InputError, match="missing or infinite band"):
        mixture_quantile(pd.DataFrame({"mean": [1.0], "hi-95": [float("nan")]}), 0.5)


def test_the_solution_minimises_the_stated_expected_cost() -> None:
    steps = rows((2.0, 5.0, 12.0, 20.0, 30.0), (0.0, 1.0, 3.0, 9.0, 11.0), (10.0, 14.0, 15.0, 25.0, 40.0))
    under, over = 3.0, 1.0
    best = mixture_quantile(steps, critical_ratio(under, over))
    # The cost Σ_t E[u (D_t − q)+ + o (q − D_t)+] by quadrature over each step's quantile function.
    u = (np.arange(20000) + 0.5) / 20000
    levels = np.array(list(BAND_LEVELS.values()))
    draws = np.concatenate([np.interp(u, levels, row) for row in steps.to_numpy()])

    def cost(q: float) -> float:
        return float(np.mean(under * np.maximum(draws - q, 0) + over * np.maximum(q - draws, 0)))

    grid = np.linspace(0, 40, 4001)
    assert best == pytest.approx(float(grid[np.argmin([cost(q) for q in grid])]), abs=0.02)


def test_forecast_targets_follow_the_objective_when_it_is_set() -> None:
    times = pd.date_range(NOW, periods=2, freq="h")
    forecast = pd.DataFrame(
        {
            ID: "q",
            TIME: times,
            "lo-95": [0.0, 40.0],
            "lo-80": [0.0, 40.0],
            "mean": [20.0, 60.0],
            "hi-80": [40.0, 80.0],
            "hi-95": [40.0, 80.0],
        }
    )
    settings = PlannerSettings.model_validate(
        {"headroom": 0.0, "objective": {"reclaim_gpu_h": 1.0, "wait_gpu_h": 1.0, "idle_gpu_h": 1.0}}
    )
    target = forecast_targets(forecast, settings, now=NOW)[("q", "nvidia.com/gpu")]
    assert (target.deserved, target.guarantee) == (40.0, 40.0)  # the median of the mixture, both at p = 0.5
    assert "newsvendor p=0.50" in target.basis
    plain = PlannerSettings.model_validate({"headroom": 0.0, "deserved_quantile": "hi-80"})  # the fixed column
    fixed = forecast_targets(forecast, plain, now=NOW)[("q", "nvidia.com/gpu")]
    assert (fixed.deserved, fixed.guarantee) == (80.0, 0.0)  # without it: max hi-80, min lo-80
