"""The safety invariants as a checker, independent of how the planner tried to keep them.

The property tests, the replay benchmark and the actuator (a last gate before any write) all call
``check_invariants``; a non-empty result means the plan must not be applied.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence

from predictor.planner.settings import PROTECTED_QUEUES
from predictor.planner.state import QueueState

__all__ = ["check_invariants"]

_EPS = 1e-6


def _ordering(queue: QueueState) -> list[str]:
    out = []
    for resource, g in queue.guarantee.items():
        d = queue.deserved.get(resource)
        if d is None:
            out.append(f"{queue.name}: guarantee[{resource}] without deserved (the webhook rejects it)")
        elif g > d + _EPS:
            out.append(f"{queue.name}: guarantee[{resource}] {g:g} > deserved {d:g}")
    for resource, d in queue.deserved.items():
        c = queue.capability.get(resource)
        if c is not None and d > c + _EPS:
            out.append(f"{queue.name}: deserved[{resource}] {d:g} > capability {c:g}")
    return out


def _sums(queues: Mapping[str, QueueState], field_name: str) -> list[str]:
    out = []
    kids: dict[str, list[QueueState]] = {}
    for q in queues.values():
        if q.parent:
            kids.setdefault(q.parent, []).append(q)
    for parent, children in kids.items():
        if parent not in queues:
            continue
        for resource, limit in queues[parent].get(field_name).items():
            values = [c.get(field_name).get(resource, 0.0) for c in children]
            if field_name == "capability":
                if max(values, default=0.0) > limit + _EPS:
                    out.append(f"{parent}: a child's capability[{resource}] exceeds the parent's {limit:g}")
            elif sum(values) > limit + _EPS:
                out.append(f"{parent}: Σ children {field_name}[{resource}] {sum(values):g} > {limit:g}")
    return out


def check_invariants(
    before: Sequence[QueueState],
    desired: Mapping[str, QueueState],
    allocatable: Mapping[str, float] | None = None,
    *,
    reclaim_above_deserved: Container[str] = (),
) -> list[str]:
    """Every broken invariant of ``desired`` against the live ``before`` state, in words (``[]`` if none).

    ``reclaim_above_deserved`` names queues whose deserved may go below allocated because reclaim is the
    intended mechanism there (``predictor.planner.safety.allocated_floor``); their capability keeps the floor.

    Rules that the live state already broke (a parent over-committed by hand, a failed node) are only
    reported when the plan makes them worse, because the planner cannot be blamed for what it found.
    """
    live = {q.name: q for q in before}
    merged = {**live, **desired}
    problems: list[str] = []
    for name, queue in desired.items():
        old = live.get(name)
        if name in PROTECTED_QUEUES or (old is not None and not old.managed):
            if old is not None and (queue.deserved, queue.capability, queue.guarantee, queue.weight) != (
                old.deserved,
                old.capability,
                old.guarantee,
                old.weight,
            ):
                problems.append(f"{name}: protected or opted-out queue would be changed")
            continue
        problems += _ordering(queue)
        if old is None:
            continue
        for field_name in ("deserved", "capability"):
            if field_name == "deserved" and name in reclaim_above_deserved:
                continue
            for resource, new in queue.get(field_name).items():
                prev = old.get(field_name).get(resource)
                held = old.allocated.get(resource, 0.0)
                floor = held if prev is None else min(prev, held)
                if new < floor - _EPS:
                    problems.append(f"{name}: {field_name}[{resource}] {new:g} below allocated floor {floor:g}")
            dropped = set(old.get(field_name)) - set(queue.get(field_name))
            if field_name == "deserved" and dropped:
                problems.append(f"{name}: deserved[{sorted(dropped)[0]}] would be removed")
    for field_name in ("deserved", "guarantee", "capability"):
        was = set(_sums(live, field_name))
        problems += [p for p in _sums(merged, field_name) if p not in was]
    if allocatable:
        parents = {q.parent for q in merged.values() if q.parent}
        for resource, limit in allocatable.items():
            total = sum(q.guarantee.get(resource, 0.0) for n, q in merged.items() if n not in parents)
            total_before = sum(q.guarantee.get(resource, 0.0) for n, q in live.items() if n not in parents)
            if total > limit + _EPS and total > total_before + _EPS:
                problems.append(f"Σ guarantee[{resource}] {total:g} > live allocatable {limit:g}")
    return problems
