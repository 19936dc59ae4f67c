"""Property tests of the safety policy: whatever the forecast says, no invariant is ever broken.

Hypothesis draws live queue states (consistent, as the Volcano webhook keeps them), arbitrary raw targets
(the policy must not trust the forecaster) and live allocatable GPUs, and checks the plan with the
independent ``check_invariants``; then it drives the loop cycle after cycle to check convergence,
idempotence and the absence of flip-flop inside the dead band and the stabilisation windows.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from predictor.planner import (
    Memory,
    PlannerSettings,
    QueueState,
    check_invariants,
    plan_queues,
    targets_from_mapping,
)

GPU = "nvidia.com/gpu"
HOUR = 3600.0
POLICY = PlannerSettings()  # type: ignore[call-arg]

gpus = st.integers(min_value=0, max_value=200).map(float)


@st.composite
def queue_states(draw: st.DrawFn, name: str, parent: str | None = None) -> QueueState:
    g, d, c = sorted(draw(st.lists(gpus, min_size=3, max_size=3)))
    allocated = draw(st.floats(min_value=0, max_value=c * 1.2 + 1, allow_nan=False))
    managed = draw(st.booleans()) if draw(st.integers(0, 9)) == 0 else True
    return QueueState(
        name=name,
        guarantee={GPU: g},
        deserved={GPU: d},
        capability={GPU: c},
        allocated={GPU: round(allocated)},
        parent=parent,
        managed=managed,
    )


@st.composite
def clusters(draw: st.DrawFn) -> list[QueueState]:
    n = draw(st.integers(min_value=1, max_value=6))
    queues = [draw(queue_states(f"q{i}")) for i in range(n)]
    if draw(st.booleans()):
        queues.append(draw(queue_states("default")))
    if draw(st.booleans()):
        # A hierarchy whose live state is consistent: the parent holds its children.
        kids = [draw(queue_states(f"team-a-{i}", parent="team-a")) for i in range(draw(st.integers(1, 3)))]
        g, d = (sum(k.get(f)[GPU] for k in kids) for f in ("guarantee", "deserved"))
        d += draw(gpus)
        c = max(max(k.capability[GPU] for k in kids), d) + draw(gpus)
        parent = QueueState(
            name="team-a",
            guarantee={GPU: g},
            deserved={GPU: d},
            capability={GPU: c},
            allocated={GPU: sum(k.allocated[GPU] for k in kids)},
        )
        queues += [parent, *kids]
    return queues


def targets_for(draw: st.DrawFn, queues: list[QueueState]) -> dict[tuple[str, str], tuple[float, float, float]]:
    out = {}
    for q in queues:
        if draw(st.integers(0, 9)) > 0:
            out[(q.name, GPU)] = (draw(gpus), draw(gpus), draw(gpus))
    return out


def step_of(before: float) -> float:
    return max(POLICY.max_step_abs, POLICY.max_step_rel * before)  # the policy floors it to whole GPUs


def live_after(queues: list[QueueState], desired: dict[str, QueueState]) -> list[QueueState]:
    return [desired.get(q.name, q) for q in queues]


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_no_invariant_is_ever_broken(data: st.DataObject) -> None:
    queues = data.draw(clusters())
    raw = targets_for(data.draw, queues)
    allocatable = {GPU: float(data.draw(st.integers(0, 1200)))}
    plan = plan_queues(queues, targets_from_mapping(raw), POLICY, now=1e9, allocatable=allocatable)
    assert check_invariants(queues, dict(plan.desired), allocatable) == []
    live = {q.name: q for q in queues}
    for change in plan.changes:
        assert change.reason, change
        if change.field == "deserved" and change.code in ("forecast", "max_step") and change.before is not None:
            assert abs(change.after - change.before) <= step_of(change.before) + 1e-9, change
    for name in ("root", "default"):
        assert name not in plan.desired
    for q in queues:
        if not q.managed and q.name not in ("root", "default"):
            assert q.name not in plan.desired and any(h.queue == q.name and h.code == "opted_out" for h in plan.held)
        assert q.name in plan.desired or q.name in ("root", "default") or not live[q.name].managed


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_cycles_converge_and_then_stay_put(data: st.DataObject) -> None:
    queues = data.draw(clusters())
    targets = targets_from_mapping(targets_for(data.draw, queues))
    allocatable = {GPU: float(data.draw(st.integers(0, 1200)))}
    gap = HOUR
    memory, now = Memory(), 1e9
    for _ in range(150):
        plan = plan_queues(queues, targets, POLICY, now=now, allocatable=allocatable, memory=memory)
        assert check_invariants(queues, dict(plan.desired), allocatable) == []
        queues, memory, now = live_after(queues, dict(plan.desired)), plan.memory, now + gap
        waiting = any(h.code in ("stabilising", "cooldown") for h in plan.held)
        if not plan.changes and not waiting:
            break
    else:
        raise AssertionError("the plan did not converge in 150 hourly cycles")
    # Converged: the same inputs plan nothing, now and later (plan returns [] once converged).
    for later in (now, now + gap):
        again = plan_queues(queues, targets, POLICY, now=later, allocatable=allocatable, memory=memory)
        assert again.changes == ()


@settings(max_examples=100, deadline=None)
@given(level=st.integers(min_value=0, max_value=150), noise=st.lists(st.floats(-0.99, 0.99), min_size=5, max_size=48))
def test_no_change_inside_the_dead_band_under_noisy_forecasts(level: int, noise: list[float]) -> None:
    current = float(level)
    queue = QueueState(
        name="q", deserved={GPU: current}, capability={GPU: current}, guarantee={GPU: 0.0}, allocated={GPU: 0.0}
    )
    band = max(POLICY.dead_band_abs, POLICY.dead_band_rel * current)
    memory = Memory()
    for i, e in enumerate(noise):
        value = max(current + e * band, 0.0)
        targets = targets_from_mapping({("q", GPU): (value, value, 0.0)})
        plan = plan_queues([queue], targets, POLICY, now=1e9 + i * HOUR, memory=memory)
        assert plan.changes == (), plan.changes
        memory = plan.memory


@settings(max_examples=100, deadline=None)
@given(targets=st.lists(st.integers(min_value=0, max_value=60).map(float), min_size=4, max_size=48))
def test_no_shrink_within_the_shrink_window_after_a_grow(targets: list[float]) -> None:
    policy = replace_policy(cooldown_s=0.0)
    queue = QueueState(name="q", deserved={GPU: 20.0}, capability={GPU: 60.0}, allocated={GPU: 0.0})
    memory, last_grow = Memory(), None
    for i, value in enumerate(targets):
        now = 1e9 + i * HOUR
        plan = plan_queues(
            [queue], targets_from_mapping({("q", GPU): (value, 60.0, 0.0)}), policy, now=now, memory=memory
        )
        for change in plan.changes:
            if change.field != "deserved":
                continue
            assert change.before is not None
            if change.after > change.before:
                last_grow = now
            elif last_grow is not None:
                assert now - last_grow > policy.shrink_window_s, "shrank inside the stabilisation window"
        queue, memory = plan.desired["q"], plan.memory


def replace_policy(**changes: object) -> PlannerSettings:
    return PlannerSettings.model_validate({**POLICY.model_dump(), **changes})


def test_replace_keeps_frozen_state() -> None:
    q = QueueState(name="a", deserved={GPU: 1.0})
    assert replace(q, weight=3).deserved == {GPU: 1.0}


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_pending_raises_keep_every_invariant_and_cuts_keep_their_limits(data: st.DataObject) -> None:
    queues = [replace(q, pending={GPU: float(data.draw(st.integers(0, 150)))}) for q in data.draw(clusters())]
    raw = targets_for(data.draw, queues)
    allocatable = {GPU: float(data.draw(st.integers(0, 1200)))}
    policy = replace_policy(pending_raise=data.draw(st.sampled_from(["target", "lift"])))
    recent = {q.name: 1e9 - 600 for q in queues if data.draw(st.booleans())}  # in their cooldown
    plan = plan_queues(queues, targets_from_mapping(raw), policy, now=1e9, allocatable=allocatable, last_changed=recent)
    assert check_invariants(queues, dict(plan.desired), allocatable) == []
    live = {q.name: q for q in queues}
    for change in plan.changes:
        q = live[change.queue]
        if change.field == "deserved" and change.before is not None and change.after < change.before:
            assert change.queue not in recent and change.before - change.after <= step_of(change.before) + 1e-9
        if change.code == "pending_raise":
            assert change.after <= q.allocated[GPU] + q.pending[GPU] + 1e-9, change
        elif change.queue in recent:  # a queue in its cooldown moves only for its pending gangs (or ordering)
            assert change.code in ("ordering", "parent_sum"), change
