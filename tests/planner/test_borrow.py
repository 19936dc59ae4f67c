"""``planner.borrow``: capability lets a queue borrow idle GPUs (elastic) or caps it at the forecast."""

from __future__ import annotations

import pandas as pd

from predictor.planner import PlannerSettings, QueueState, plan_queues, targets_from_mapping

GPU = "nvidia.com/gpu"
NOW = pd.Timestamp("2026-11-02T00:00:00Z")
LOOSE = {"max_step_abs": 1000.0, "max_step_rel": 10.0, "shrink_window_s": 0.0, "cooldown_s": 0.0}


def plan(borrow: str, allocatable: dict[str, float] | None) -> dict[str, tuple[float, str, str]]:
    queue = QueueState(name="a", guarantee={GPU: 0.0}, deserved={GPU: 10.0}, capability={GPU: 20.0},
                       allocated={GPU: 10.0})
    settings = PlannerSettings.model_validate({"borrow": borrow, **LOOSE})
    result = plan_queues([queue], targets_from_mapping({("a", GPU): (16.0, 30.0, 4.0)}), settings, now=NOW,
                         allocatable=allocatable)
    desired = result.desired["a"]
    values = {"deserved": desired.deserved[GPU], "capability": desired.capability[GPU],
              "guarantee": desired.guarantee[GPU]}
    return {c.field: (values[c.field], c.code, c.reason) for c in result.changes if c.field in values}


def test_borrow_idle_sets_capability_to_the_live_cluster_and_keeps_the_forecast_shares() -> None:
    changes = plan("idle", {GPU: 96.0})
    assert changes["capability"][:2] == (96.0, "borrow")
    assert "live allocatable" in changes["capability"][2]
    # What is reclaimable (above deserved) and reserved (guarantee) still comes from the forecast.
    assert changes["deserved"][:2] == (16.0, "forecast") and changes["guarantee"][:2] == (4.0, "forecast")


def test_borrow_forecast_caps_capability_at_the_forecast() -> None:
    assert plan("forecast", {GPU: 96.0})["capability"][:2] == (30.0, "forecast")


def test_without_live_allocatable_there_is_nothing_known_to_borrow() -> None:
    assert plan("idle", None)["capability"][:2] == (30.0, "forecast")


def test_borrowing_idle_is_opt_in() -> None:
    """A queue marked reclaimable: false would keep what it borrows: the cap stays the forecast's by default."""
    assert PlannerSettings().borrow == "forecast"  # type: ignore[call-arg]
