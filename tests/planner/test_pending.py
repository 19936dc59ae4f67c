"""Reaction time (``planner.pending_raise``, ``planner.react_pending_gpus``): a waiting queue's deserved rises
toward what its pending gangs ask for in one cycle, within the room Σ deserved leaves, while cuts keep every
limit; and when a loop plans again between hourly cycles."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from predictor.planner import (
    PlannerSettings,
    QueuePlan,
    QueueState,
    check_invariants,
    plan_queues,
    targets_from_mapping,
)
from predictor.planner.react import PendingWatch

GPU = "nvidia.com/gpu"
NOW = pd.Timestamp("2026-11-02T12:00:00Z")


def _settings(**changes: object) -> PlannerSettings:
    return PlannerSettings.model_validate(changes)


def _queue(name: str, deserved: float, allocated: float, pending: float = 0.0) -> QueueState:
    return QueueState(
        name=name,
        deserved={GPU: deserved},
        capability={GPU: 200.0},
        guarantee={GPU: 0.0},
        allocated={GPU: allocated},
        pending={GPU: pending},
    )


def _plan(
    settings: PlannerSettings,
    queues: list[QueueState],
    wanted: Mapping[str, float],
    allocatable: float,
    last_changed: dict[str, float] | None = None,
) -> QueuePlan:
    targets = targets_from_mapping({(q, GPU): (d, 200.0, 0.0) for q, d in wanted.items()})
    plan = plan_queues(queues, targets, settings, now=NOW, allocatable={GPU: allocatable}, last_changed=last_changed)
    assert check_invariants(queues, dict(plan.desired), {GPU: allocatable}) == []
    return plan


def _deserved(plan: QueuePlan, name: str) -> float:
    return float(plan.desired[name].deserved[GPU])


def test_a_burst_gets_its_share_in_one_cycle_while_cuts_keep_their_limits() -> None:
    # a: 1 GPU deserved, 40 one-GPU jobs pending; b holds 100 on a deserved of 100, forecast 50.
    queues = [_queue("a", 1, 1, pending=40), _queue("b", 100, 100)]
    wanted = {"a": 50, "b": 50}
    stepped = _plan(_settings(), queues, wanted, 200)
    assert _deserved(stepped, "a") == 9  # max step: max(8 GPUs, 50 %) per cycle
    raised = _plan(_settings(pending_raise="target"), queues, wanted, 200)
    assert _deserved(raised, "a") == 41  # allocated + pending, below the target of 50
    change = next(c for c in raised.changes if c.queue == "a" and c.field == "deserved")
    assert change.code == "pending_raise" and "allocated + pending GPUs 41" in change.reason
    # b's cut evicts: still stabilising (a fresh loop has no 6 h of recommendations), as without the rule
    assert _deserved(raised, "b") == 100
    assert any(h.queue == "b" and h.code == "stabilising" for h in raised.held)


def test_the_raise_takes_only_the_room_sigma_deserved_leaves_and_says_so() -> None:
    queues = [_queue("a", 1, 1, pending=40), _queue("b", 100, 100)]
    raised = _plan(_settings(pending_raise="target"), queues, {"a": 50, "b": 50}, 120)
    # room: 120 − b's 100 − a's step-limited 9 = 11 more than the step: a gets 20, Σ deserved = 120
    assert _deserved(raised, "a") == 20
    change = next(c for c in raised.changes if c.queue == "a" and c.field == "deserved")
    assert "may not pass live allocatable 120" in change.reason


def test_with_unfitted_shares_a_raise_is_not_squeezed_into_the_cluster_either() -> None:
    # Shares beyond the cluster (fit_deserved_to_cluster: false) leave no "room" to fit a raise into, so
    # fitting it would cancel every raise; a waiting queue gets what its gangs ask for, as its share does.
    queues = [_queue("a", 1, 1, pending=40), _queue("b", 100, 100)]
    settings = _settings(pending_raise="target", fit_deserved_to_cluster=False)
    raised = _plan(settings, queues, {"a": 50, "b": 50}, 120)
    assert _deserved(raised, "a") == 41  # allocated + pending, though Σ deserved (141) passes the cluster's 120
    change = next(c for c in raised.changes if c.queue == "a" and c.field == "deserved")
    assert change.code == "pending_raise" and "may not pass" not in change.reason


def test_a_queue_a_few_gpus_short_is_not_raised_past_the_dead_band() -> None:
    queues = [_queue("a", 100, 100, pending=5)]
    plan = _plan(_settings(pending_raise="target"), queues, {"a": 108}, 200)
    assert _deserved(plan, "a") == 100 and not plan.changes


def test_a_raise_passes_the_cooldown_but_a_cut_does_not() -> None:
    ten_minutes_ago = NOW.timestamp() - 600
    queues = [_queue("a", 1, 1, pending=40), _queue("b", 100, 20)]
    recent = {"a": ten_minutes_ago, "b": ten_minutes_ago}
    held = _plan(_settings(), queues, {"a": 50, "b": 50}, 200, recent)
    assert not held.changes and {h.code for h in held.held} == {"cooldown"}
    raised = _plan(_settings(pending_raise="target"), queues, {"a": 50, "b": 50}, 200, recent)
    assert [(c.queue, c.field, c.after) for c in raised.changes] == [("a", "deserved", 41)]
    assert _deserved(raised, "b") == 100 and any(h.queue == "b" and h.code == "cooldown" for h in raised.held)


def test_a_raise_the_step_limit_allows_still_passes_the_cooldown_and_stops_at_the_evidence() -> None:
    # a holds 10 on 24 deserved and asks 24 more (34): the step limit (max(8, 50 % of 24) = 12) would allow
    # 36, so the raise is not clipped; in the cooldown it must still apply, up to the 34 its gangs ask for.
    recent = {"a": NOW.timestamp() - 1500}
    queues = [_queue("a", 24, 10, pending=24), _queue("b", 100, 100)]
    raised = _plan(_settings(pending_raise="lift"), queues, {"a": 50, "b": 100}, 200, recent)
    assert [(c.queue, c.field, c.after, c.code) for c in raised.changes] == [("a", "deserved", 34, "pending_raise")]
    free = _plan(_settings(pending_raise="lift"), queues, {"a": 50, "b": 100}, 200)
    assert _deserved(free, "a") == 36  # out of its cooldown the ordinary step applies, beyond the evidence


def test_lift_raises_a_burst_the_forecast_has_not_seen_yet() -> None:
    # The forecast still says 3 GPUs for a (made before the burst); lift sizes the target from the evidence.
    queues = [_queue("a", 1, 1, pending=40), _queue("b", 100, 100)]
    assert _deserved(_plan(_settings(pending_raise="target"), queues, {"a": 3, "b": 100}, 200), "a") == 3
    assert _deserved(_plan(_settings(pending_raise="lift"), queues, {"a": 3, "b": 100}, 200), "a") == 41


def test_the_watch_fires_after_pending_has_lasted_and_only_beyond_deserved() -> None:
    watch = PendingWatch(_settings(react_pending_gpus=8, react_after_s=600))
    burst, content = _queue("a", 1, 1, pending=40), _queue("b", 100, 80, pending=10)
    t0 = NOW.timestamp()
    assert watch.observe([burst, content], t0) == []
    assert watch.observe([burst, content], t0 + 300) == []
    assert watch.observe([burst, content], t0 + 600) == ["a"]  # b asks for 90 of its 100: no trigger
    assert watch.observe([burst], t0 + 900) == []  # its clock restarted
    assert watch.observe([_queue("a", 1, 1)], t0 + 1200) == []  # pending gone: forgotten
    assert PendingWatch(_settings()).observe([burst], t0 + 10**6) == []  # off by default


def test_lift_plans_a_waiting_queue_the_forecast_does_not_cover_yet() -> None:
    # c is new since the model was trained: no target. Held as no_forecast, unless lift sizes it from its gangs.
    queues = [_queue("a", 100, 100), _queue("c", 1, 0, pending=30)]
    held = _plan(_settings(pending_raise="target"), queues, {"a": 100}, 200)
    assert _deserved(held, "c") == 1 and any(h.queue == "c" and h.code == "no_forecast" for h in held.held)
    assert _deserved(_plan(_settings(pending_raise="lift"), queues, {"a": 100}, 200), "c") == 30
