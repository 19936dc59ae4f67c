"""``planner.borrow``: capability lets a queue borrow idle GPUs (elastic) or caps it at the forecast; a queue
Volcano never reclaims from (``spec.reclaimable: false``) borrows nothing; and with
``planner.deserved_below_allocated`` (idle, reclaimable queues) deserved may be planned below allocated, so what
a queue borrowed stays reclaimable."""

from __future__ import annotations

import pandas as pd
import pytest

from predictor.errors import InputError
from predictor.planner import (
    PlannerSettings,
    QueueState,
    check_invariants,
    plan_cycle,
    plan_queues,
    queues_from_list,
    targets_from_mapping,
)
from tests.actuators.fake_apiserver import queue_object

GPU = "nvidia.com/gpu"
NOW = pd.Timestamp("2026-11-02T00:00:00Z")
LOOSE = {"max_step_abs": 1000.0, "max_step_rel": 10.0, "shrink_window_s": 0.0, "cooldown_s": 0.0}


def plan(
    borrow: str,
    allocatable: dict[str, float] | None,
    *,
    reclaimable: bool = True,
    allocated: float = 10.0,
    below: bool = False,
    target: tuple[float, float, float] = (16.0, 30.0, 4.0),
    deserved: float = 10.0,
    capability: float = 20.0,
) -> dict[str, tuple[float, str, str]]:
    queue = QueueState(
        name="a",
        guarantee={GPU: 0.0},
        deserved={GPU: deserved},
        capability={GPU: capability},
        allocated={GPU: allocated},
        reclaimable=reclaimable,
    )
    settings = PlannerSettings.model_validate({"borrow": borrow, "deserved_below_allocated": below, **LOOSE})
    result = plan_queues(
        [queue], targets_from_mapping({("a", GPU): target}), settings, now=NOW, allocatable=allocatable
    )
    desired = result.desired["a"]
    values = {
        "deserved": desired.deserved[GPU],
        "capability": desired.capability[GPU],
        "guarantee": desired.guarantee[GPU],
    }
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


def test_borrowing_idle_is_the_default() -> None:
    """It won the replays (docs/design.md, 'Borrowing'), and a queue that would keep what it borrows
    (reclaimable: false) is no longer allowed to borrow, which is what kept it opt-in."""
    assert PlannerSettings().borrow == "idle"  # type: ignore[call-arg]


@pytest.mark.parametrize("borrow", ["idle", "forecast"])
def test_a_queue_volcano_never_reclaims_from_borrows_nothing(borrow: str) -> None:
    changes = plan(borrow, {GPU: 96.0}, reclaimable=False)
    assert changes["deserved"][:2] == (16.0, "forecast")
    value, code, reason = changes["capability"]
    assert (value, code) == (16.0, "borrow") and "not reclaimable" in reason


def test_a_non_reclaimable_queue_keeps_its_gang_floor_and_never_drops_below_allocated() -> None:
    # Deserved 40 → target 12 and capability 40 → 12 (its deserved) but 18 GPUs are allocated: capability
    # stops there (a cap evicts nothing), and so does deserved (reclaim would never take the rest back).
    changes = plan(
        "idle", {GPU: 96.0}, reclaimable=False, allocated=18.0, target=(12.0, 30.0, 0.0), deserved=40.0, capability=40.0
    )
    assert changes["capability"][:2] == (18.0, "below_allocated")
    assert changes["deserved"][:2] == (18.0, "below_allocated")


def test_deserved_below_allocated_lets_the_borrowed_gpus_stay_reclaimable() -> None:
    # 30 GPUs allocated, the forecast asks for 12: the 18 above it are borrowed, and reclaim may take them
    # back when another queue below its deserved has pending work. Capability (the admission cap) never
    # goes below allocated.
    changes = plan(
        "idle", {GPU: 96.0}, allocated=30.0, target=(12.0, 30.0, 0.0), deserved=40.0, capability=40.0, below=True
    )
    assert changes["deserved"][:2] == (12.0, "forecast")
    assert changes["capability"][0] == 96.0


@pytest.mark.parametrize(
    ("borrow", "reclaimable", "below"),
    [
        ("idle", True, False),  # the default: deserved never goes below what a queue holds
        ("forecast", True, True),  # borrowing capped at the forecast: nothing is meant to be reclaimed
        ("idle", False, True),  # Volcano never reclaims from this queue
    ],
)
def test_otherwise_deserved_stops_at_allocated(borrow: str, reclaimable: bool, below: bool) -> None:
    changes = plan(
        borrow,
        {GPU: 96.0},
        allocated=30.0,
        target=(12.0, 30.0, 0.0),
        deserved=40.0,
        capability=40.0,
        reclaimable=reclaimable,
        below=below,
    )
    assert changes["deserved"][:2] == (30.0, "below_allocated")


def test_the_invariant_check_allows_deserved_below_allocated_only_where_reclaim_is_intended() -> None:
    live = QueueState(name="a", deserved={GPU: 40.0}, capability={GPU: 96.0}, allocated={GPU: 30.0})
    lowered = QueueState(name="a", deserved={GPU: 12.0}, capability={GPU: 96.0}, allocated={GPU: 30.0})
    assert check_invariants([live], {"a": lowered}) == ["a: deserved[nvidia.com/gpu] 12 below allocated floor 30"]
    assert check_invariants([live], {"a": lowered}, reclaim_above_deserved={"a"}) == []
    capped = QueueState(name="a", deserved={GPU: 12.0}, capability={GPU: 20.0}, allocated={GPU: 30.0})
    assert any("capability" in p for p in check_invariants([live], {"a": capped}, reclaim_above_deserved={"a"}))


def test_a_planning_cycle_lowers_deserved_below_allocated_without_holding_where_allowed() -> None:
    """plan_cycle re-checks the invariants: the check must know where reclaim is intended, or it would hold
    every plan that makes borrowed GPUs reclaimable (invalid_state)."""
    times = pd.date_range(NOW, periods=24, freq="h")
    forecast = pd.DataFrame(
        {"series_id": "a", "timestamp": times, "mean": 10.0, "lo-80": 2.0, "hi-80": 10.0, "lo-95": 1.0, "hi-95": 11.0}
    )
    queue = QueueState(name="a", deserved={GPU: 40.0}, capability={GPU: 96.0}, allocated={GPU: 30.0})
    settings = PlannerSettings.model_validate({**LOOSE, "deserved_below_allocated": True})
    plan_, hold = plan_cycle([queue], forecast, settings, now=NOW, allocatable={GPU: 96.0})
    assert hold is None and plan_.desired["a"].deserved[GPU] == 11.0


def test_spec_reclaimable_is_read_with_volcanos_default() -> None:
    unset = queue_object("a", deserved=8, capability=8)
    del unset["spec"]["reclaimable"]
    assert queues_from_list([unset])[0].reclaimable  # the mutating webhook's default, true
    doc = queue_object("c", deserved=8, capability=8)
    doc["spec"]["reclaimable"] = False
    assert not queues_from_list([doc])[0].reclaimable
    doc["spec"]["reclaimable"] = "no"
    with pytest.raises(InputError, match=r"queue 'c': spec.reclaimable must be true or false"):
        queues_from_list([doc], source="queues.json")
