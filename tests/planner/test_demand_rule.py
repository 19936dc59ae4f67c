"""The demand/forecast combination rule (docs/design.md): the larger sets the target, and the code says which."""

from __future__ import annotations

import pandas as pd
import pytest

from predictor.errors import InputError
from predictor.planner import PlannerSettings, forecast_targets, plan_queues, queues_from_list
from predictor.planner.demand_rule import Demand, combine, demand_peaks
from tests.actuators.fake_apiserver import queue_object

NOW = pd.Timestamp("2026-11-02T00:00:00Z")
GPU = "nvidia.com/gpu"
POLICY = PlannerSettings(max_step_abs=64, max_step_rel=10)  # type: ignore[call-arg]


def _forecast(level: float) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "series_id": "a",
                "timestamp": NOW + pd.Timedelta(hours=h),
                "mean": level,
                "lo-80": level - 2,
                "hi-80": level + 2,
                "lo-95": level - 4,
                "hi-95": level + 4,
            }
            for h in range(24)
        ]
    )


def test_the_larger_of_forecast_and_demand_sets_each_field() -> None:
    above = combine(12.0, 14.0, Demand(20.0, "demand q0.95 24 h peak (models:/gpu-demand/3)"), quantile_name="hi-80")
    assert (above.deserved, above.capability) == (20.0, 20.0)
    assert dict(above.codes) == {"deserved": "demand", "capability": "demand"}
    assert above.basis.startswith("demand q0.95 24 h peak (models:/gpu-demand/3) 20.0 > forecast hi-80 12.0")
    between = combine(12.0, 24.0, Demand(20.0, "demand peak"), quantile_name="hi-80")
    assert (between.deserved, between.capability) == (20.0, 24.0) and dict(between.codes) == {"deserved": "demand"}
    below = combine(12.0, 14.0, Demand(5.0, "demand peak"), quantile_name="hi-80")
    assert (below.deserved, below.capability, dict(below.codes)) == (12.0, 14.0, {})
    assert "≥ demand peak 5.0" in below.basis
    unknown = combine(12.0, 14.0, None, quantile_name="hi-80", unknown="no pending-jobs series")
    assert (unknown.deserved, dict(unknown.codes)) == (12.0, {})
    assert unknown.basis.endswith("demand unknown: no pending-jobs series")


def test_demand_codes_reach_the_plan_and_an_unchanged_demand_field_is_no_hold() -> None:
    demand = pd.DataFrame(
        {"queue": ["a"], "peak": [30.0], "quantile": [0.95], "horizon_h": [24], "model": ["models:/gpu-demand/3"]}
    )
    targets = forecast_targets(_forecast(10.0), POLICY, now=NOW, demand=demand)
    assert targets[("a", GPU)].deserved == 33.0 and targets[("a", GPU)].code("deserved") == "demand"
    assert targets[("a", GPU)].code("guarantee") == "forecast"
    queues = queues_from_list([queue_object("a", deserved=16, capability=33, guarantee=2)])
    plan = plan_queues(queues, targets, POLICY, now=NOW)
    deserved = [c for c in plan.changes if c.field == "deserved"]
    assert [(c.after, c.code) for c in deserved] == [(33.0, "demand")]
    assert "models:/gpu-demand/3" in deserved[0].reason
    guarantee = [c for c in plan.changes if c.field == "guarantee"]
    assert [c.code for c in guarantee] == ["forecast"]
    assert guarantee[0].reason.startswith("guarantee target 8 from forecast lo-80 8.0 (deserved: demand q0.95")
    # capability is already 33: no change, and a field at its demand target is not a hold either.
    assert not [h for h in plan.held if h.field == "capability"]


def test_a_bad_demand_frame_is_one_clear_error() -> None:
    with pytest.raises(InputError, match="outside 0"):
        demand_peaks(pd.DataFrame({"queue": ["a"], "peak": [-1.0]}), POLICY)
    with pytest.raises(InputError, match="not a number"):
        demand_peaks(pd.DataFrame({"queue": ["a"], "peak": ["many"]}), POLICY)
    with pytest.raises(InputError, match="needs a queue"):
        demand_peaks(pd.DataFrame({"peak": [1.0]}), POLICY)
