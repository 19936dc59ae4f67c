"""``planner.guarantee_within_demand``: a guarantee is never planned above what the queue holds or asks for.

Volcano withholds every queue's guarantee from the others (``realCapability = total − Σ guarantee + own``),
so a guaranteed GPU nobody in the queue asks for is idle while other queues' jobs wait.
"""

from __future__ import annotations

import pandas as pd

from predictor.planner import PlannerSettings, QueueState, plan_queues, targets_from_mapping

GPU = "nvidia.com/gpu"
NOW = pd.Timestamp("2026-11-02T00:00:00Z")


def planned_guarantee(
    within: bool, allocated: float, *, guarantee: float = 0.0, pending: float | None = None
) -> tuple[float, str]:
    queue = QueueState(
        name="a",
        guarantee={GPU: guarantee},
        deserved={GPU: 40.0},
        capability={GPU: 96.0},
        allocated={GPU: allocated},
        pending={} if pending is None else {GPU: pending},
    )
    settings = PlannerSettings.model_validate(
        {"guarantee_within_demand": within, "max_step_abs": 1000.0, "shrink_window_s": 0.0}
    )
    result = plan_queues(
        [queue], targets_from_mapping({("a", GPU): (40.0, 96.0, 30.0)}), settings, now=NOW, allocatable={GPU: 96.0}
    )
    codes = [c.code for c in result.changes if c.field == "guarantee"]
    return result.desired["a"].guarantee[GPU], codes[0] if codes else ""


def test_the_guarantee_stops_at_what_the_queue_holds_and_asks_for() -> None:
    assert planned_guarantee(True, allocated=12.0) == (12.0, "guarantee_held")  # pending unknown: what it holds
    assert planned_guarantee(True, allocated=12.0, pending=8.0) == (20.0, "guarantee_held")
    # Held or asked for above the target: the forecast's floor stands.
    assert planned_guarantee(True, allocated=12.0, pending=30.0) == (30.0, "forecast")


def test_a_guarantee_nobody_asks_for_comes_down_at_once() -> None:
    # The queue's jobs ended: the 30 GPUs it had guaranteed would sit idle behind every other queue.
    assert planned_guarantee(True, allocated=4.0, guarantee=30.0, pending=0.0) == (4.0, "guarantee_held")


def test_off_the_forecast_floor_is_reserved_whatever_is_asked() -> None:
    assert planned_guarantee(False, allocated=12.0, pending=0.0)[0] == 30.0
