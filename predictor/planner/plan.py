"""One planning cycle: live queues + targets → desired queues, every change and hold with its reason.

Pure: the clock (``now``), the cooldown record (``last_changed``, read by the loop from the audit log) and
the stabilisation memory come in as arguments and the new memory goes out, so the same inputs always give
the same plan and a restarted loop continues where it stopped. The targets are fitted to the live cluster
first (``predictor.planner.queue_targets``); what follows here decides each field and the rules across queues.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import pandas as pd

from predictor.planner import pending as pending_rule
from predictor.planner.decisions import SHAPING_CODES, TARGET_CODES, FieldChange, Hold, Memory, QueuePlan, Series
from predictor.planner.eligibility import why_not_planned
from predictor.planner.gangs import hard_bounds
from predictor.planner.queue_targets import borrow, fit_deserved, targets_by_queue
from predictor.planner.safety import (
    allocated_floor,
    children_of,
    decide_field,
    depth,
    reclaim_intended,
    remember,
    scale_guarantees,
)
from predictor.planner.settings import PROTECTED_QUEUES, PlannerSettings
from predictor.planner.state import FIELDS, QueueState
from predictor.planner.targets import Target

__all__ = ["plan_queues"]

Values = dict[str, dict[str, float]]  # field → resource → GPUs
Notes = dict[tuple[str, str, str], tuple[str, str]]  # (queue, field, resource) → (code, note)


def _seconds(now: pd.Timestamp | float) -> float:
    return float(now) if isinstance(now, int | float) else pd.Timestamp(now).timestamp()


def _values(queue: QueueState) -> Values:
    return {f: dict(queue.get(f)) for f in FIELDS}


def _order(values: Values, resource: str) -> list[tuple[str, str]]:
    """Enforce guarantee ≤ deserved ≤ capability for one resource; returns the fields moved and how."""
    moved: list[tuple[str, str]] = []
    deserved = values["deserved"].get(resource)
    if deserved is None:
        return moved
    capability = values["capability"].get(resource)
    if capability is not None and capability < deserved:
        values["capability"][resource] = deserved
        moved.append(("capability", f"raised to deserved {deserved:g}"))
    guarantee = values["guarantee"].get(resource)
    if guarantee is not None and guarantee > deserved:
        values["guarantee"][resource] = deserved
        moved.append(("guarantee", f"lowered to deserved {deserved:g}"))
    return moved


def _plan_queue(
    queue: QueueState,
    targets: Mapping[str, Target],
    settings: PlannerSettings,
    now_s: float,
    recs: dict[str, Series],
    notes: Notes,
    *,
    raised: dict[tuple[str, str], float],
    raise_only: str = "",
) -> Values:
    """``raise_only`` (a cooldown's reason): only deserved raises backed by pending gangs apply. Each such
    raise records in ``raised`` the value it falls back to (``pending.fit_pending_raises``)."""
    values = _values(queue)
    keep = 2 * max(settings.shrink_window_s, settings.grow_window_s)
    fields = FIELDS if settings.set_guarantee else ("deserved", "capability")
    for resource, target in targets.items():
        allocated = queue.allocated.get(resource, 0.0)
        shaped = {f: (code, note) for f, code, note in target.notes}  # gangs.py: why the target moved
        for name in fields:
            key = Memory.key(queue.name, name, resource)
            raw = float(getattr(target, name))
            recs[key] = remember(recs.get(key, ()), now_s, raw, keep)
            floor = allocated_floor(name, allocated, reclaimable=queue.reclaimable, settings=settings)
            evidence = pending_rule.raise_to(queue, resource, settings) if name == "deserved" else None
            decided = decide_field(
                name,
                queue.get(name).get(resource),
                raw,
                floor,
                recs[key],
                now_s,
                settings,
                raise_to=evidence,
                raise_only=bool(raise_only),
            )
            if raise_only and decided.code != "pending_raise":
                notes[(queue.name, name, resource)] = ("cooldown", raise_only)
                continue
            if decided.code == "pending_raise":
                held = queue.get(name).get(resource)
                raised[(queue.name, resource)] = (
                    held
                    if raise_only and held is not None
                    else float(decided.limited if decided.limited is not None else raw)
                )
            if decided.value is not None:
                values[name][resource] = decided.value
            code, note = shaped.get(name, (target.code(name), f"{name} target {raw:g} from {target.basis_for(name)}"))
            # A policy that clipped the value names itself first, then what set the target it clipped
            # (forecast or demand, and from which model): the reason alone tells the whole story.
            why = f"{decided.note}; {note}" if decided.note and decided.value is not None else (decided.note or note)
            notes[(queue.name, name, resource)] = (decided.code or code, why)
        guaranteed = values["guarantee"].get(resource)
        asked = allocated + queue.pending.get(resource, 0.0)
        if (
            settings.guarantee_within_demand
            and "guarantee" in fields
            and guaranteed is not None
            and guaranteed > asked
            and not raise_only
        ):
            values["guarantee"][resource] = asked
            notes[(queue.name, "guarantee", resource)] = (
                "guarantee_held",
                f"lowered to {asked:g} GPUs allocated or pending: a guarantee nobody asks for "
                "idles GPUs other queues wait for",
            )
        floor = allocated_floor("deserved", allocated, reclaimable=queue.reclaimable, settings=settings)
        for name, code, note in hard_bounds(values, resource, target, allocated, deserved_floor=floor):
            notes[(queue.name, name, resource)] = (code, note)
        for name, note in _order(values, resource):
            notes[(queue.name, name, resource)] = ("ordering", note)
    return values


def _revert_increases(
    names: Sequence[str],
    field_name: str,
    resource: str,
    before: Mapping[str, Values],
    after: dict[str, Values],
    notes: Notes,
    code: str,
    note: str,
) -> None:
    for name in names:
        old = before[name][field_name].get(resource)
        new = after[name][field_name].get(resource)
        if new is not None and (old is None or new > old):
            if old is None:
                after[name][field_name].pop(resource, None)
            else:
                after[name][field_name][resource] = old
            notes[(name, field_name, resource)] = (code, note)
            for moved, why in _order(after[name], resource):
                notes[(name, moved, resource)] = ("ordering", why)


def _hierarchy(
    queues: Mapping[str, QueueState],
    managed: set[str],
    before: Mapping[str, Values],
    after: dict[str, Values],
    notes: Notes,
) -> None:
    """Σ children ≤ parent for deserved and guarantee; a child's capability ≤ its parent's."""
    parents = {q.name: q.parent for q in queues.values()}
    kids = children_of(parents)
    # Bottom-up: a managed parent grows to hold its children (the capacity plugin sums them anyway).
    for parent in sorted(kids, key=lambda p: -depth(p, parents)):
        if parent not in managed:
            continue
        for field_name in ("deserved", "guarantee"):
            for resource in {r for k in kids[parent] for r in after[k][field_name]}:
                total = sum(after[k][field_name].get(resource, 0.0) for k in kids[parent])
                current = after[parent][field_name].get(resource)
                if current is not None and total > current:
                    after[parent][field_name][resource] = total
                    notes[(parent, field_name, resource)] = ("parent_sum", f"raised to Σ children {total:g}")
                    for moved, why in _order(after[parent], resource):
                        notes[(parent, moved, resource)] = ("ordering", why)
        for resource, limit in list(after[parent]["capability"].items()):
            widest = max((after[k]["capability"].get(resource, 0.0) for k in kids[parent]), default=0.0)
            if widest > limit:
                after[parent]["capability"][resource] = widest
                notes[(parent, "capability", resource)] = ("parent_sum", f"raised to widest child {widest:g}")
    # Top-down: where the parent cannot hold them, children keep their old values.
    for parent in sorted(kids, key=lambda p: depth(p, parents)):
        if parent not in after:
            continue
        changing = [k for k in kids[parent] if k in managed]
        for field_name in ("deserved", "guarantee", "capability"):
            for resource, limit in after[parent][field_name].items():
                values = [after[k][field_name].get(resource, 0.0) for k in kids[parent]]
                over = max(values, default=0.0) > limit if field_name == "capability" else sum(values) > limit + 1e-9
                if over:
                    _revert_increases(
                        changing,
                        field_name,
                        resource,
                        before,
                        after,
                        notes,
                        "parent_sum",
                        f"held: parent {parent} {field_name} {limit:g} cannot hold the children",
                    )


def _guarantee_sum(
    queues: Mapping[str, QueueState],
    managed: set[str],
    before: Mapping[str, Values],
    after: dict[str, Values],
    allocatable: Mapping[str, float],
    settings: PlannerSettings,
    notes: Notes,
) -> None:
    """Σ guarantee over leaf queues ≤ live allocatable GPUs (a failed GPU lowers the limit)."""
    parents = {q.parent for q in queues.values() if q.parent}
    leaves = [n for n in queues if n not in parents]
    for resource, limit in allocatable.items():
        if sum(after[n]["guarantee"].get(resource, 0.0) for n in leaves) <= limit + 1e-9:
            continue
        movable = [n for n in leaves if n in managed]
        _revert_increases(
            movable,
            "guarantee",
            resource,
            before,
            after,
            notes,
            "guarantee_sum",
            f"held: Σ guarantee would exceed live allocatable {limit:g}",
        )
        fixed = sum(after[n]["guarantee"].get(resource, 0.0) for n in leaves if n not in managed)
        scaled = {n: after[n]["guarantee"][resource] for n in movable if resource in after[n]["guarantee"]}
        if scale_guarantees(scaled, fixed, limit, settings.round_to):
            for name, value in scaled.items():
                after[name]["guarantee"][resource] = value
                notes[(name, "guarantee", resource)] = (
                    "guarantee_sum",
                    f"lowered so Σ guarantee ≤ live allocatable {limit:g}",
                )


def _weight(values: Values, resources: Sequence[str], current: int) -> int:
    total = sum(values["deserved"].get(r, 0.0) for r in resources)
    # Proportion splits by weight/Σweight, so weight = deserved GPUs reproduces the planned shares.
    return max(1, min(65535, round(total))) if total > 0 else current


def plan_queues(
    queues: Sequence[QueueState],
    targets: Mapping[tuple[str, str], Target] | None,
    settings: PlannerSettings,
    *,
    now: pd.Timestamp | float,
    allocatable: Mapping[str, float] | None = None,
    last_changed: Mapping[str, float] | None = None,
    memory: Memory | None = None,
    hold_all: tuple[str, str] | None = None,
    held_queues: Mapping[str, tuple[str, str]] | None = None,
) -> QueuePlan:
    """Plan one cycle. ``hold_all=(code, reason)`` holds every queue (stale data, missing model, ...);
    ``held_queues`` (queue → (code, reason)) holds single queues."""
    now_s = _seconds(now)
    by_name = {q.name: q for q in queues}
    recs: dict[str, Series] = dict((memory or Memory()).recommendations)
    per_queue = targets_by_queue(targets or {}, allocatable or {})
    if targets is not None:
        pending_rule.evidence_targets(per_queue, by_name, settings)
    borrow(per_queue, by_name, allocatable or {}, settings)
    pending_rule.lift_to_pending(per_queue, by_name, settings)
    if settings.fit_deserved_to_cluster:
        fit_deserved(per_queue, queues, allocatable or {}, settings)
    held: list[Hold] = []
    notes: Notes = {}
    before = {n: _values(q) for n, q in by_name.items()}
    after = {n: _values(q) for n, q in by_name.items()}
    managed: set[str] = set()
    raised: dict[tuple[str, str], float] = {}
    cooling: set[str] = set()  # planned raise-only in their cooldown: no other rule may move them
    for queue in queues:
        own = hold_all or (held_queues or {}).get(queue.name)
        hold = why_not_planned(queue, per_queue.get(queue.name), settings, now_s, last_changed or {}, own, recs)
        # A cooldown guards against evicting twice in a row; a raise for waiting gangs evicts nothing itself.
        raise_only = (
            hold is not None
            and hold.code == "cooldown"
            and pending_rule.wants_pending_raise(queue, per_queue.get(queue.name), settings)
        )
        if hold is not None and not raise_only:
            held.append(hold)
            continue
        managed.add(queue.name)
        if raise_only:
            cooling.add(queue.name)
        after[queue.name] = _plan_queue(
            queue,
            per_queue[queue.name],
            settings,
            now_s,
            recs,
            notes,
            raised=raised,
            raise_only=hold.reason if hold is not None else "",
        )
    pending_rule.fit_pending_raises(by_name, raised, after, allocatable or {}, notes, settings)
    _hierarchy(by_name, managed, before, after, notes)
    _guarantee_sum(by_name, managed - cooling, before, after, allocatable or {}, settings, notes)
    changes: list[FieldChange] = []
    desired: dict[str, QueueState] = {}
    for queue in queues:
        if queue.name in PROTECTED_QUEUES or not queue.managed:
            continue
        desired[queue.name] = _desired_queue(queue, after[queue.name], per_queue, managed, settings, changes)
        _field_changes(queue.name, before[queue.name], after[queue.name], notes, queue.name in managed, changes, held)
    below = frozenset(n for n in desired if reclaim_intended(reclaimable=by_name[n].reclaimable, settings=settings))
    return QueuePlan(desired, tuple(changes), tuple(held), Memory(recs), below_allocated=below)


def _desired_queue(
    queue: QueueState,
    values: Values,
    per_queue: Mapping[str, Mapping[str, Target]],
    managed: set[str],
    settings: PlannerSettings,
    changes: list[FieldChange],
) -> QueueState:
    """The queue with its planned values; under the proportion plugin its weight follows, as a change."""
    weight = queue.weight
    if queue.name in managed and settings.plugin == "proportion":
        weight = _weight(values, list(per_queue.get(queue.name, {})), queue.weight)
        if weight != queue.weight:
            changes.append(
                FieldChange(
                    queue.name,
                    "weight",
                    None,
                    float(queue.weight),
                    float(weight),
                    "weight follows planned deserved (proportion plugin)",
                )
            )
    return replace(
        queue,
        weight=weight,
        guarantee=values["guarantee"],
        deserved=values["deserved"],
        capability=values["capability"],
    )


def _field_changes(
    name: str,
    before: Values,
    after: Values,
    notes: Notes,
    managed: bool,
    changes: list[FieldChange],
    held: list[Hold],
) -> None:
    """Every field that moved becomes a change; a policy that kept a managed queue's field becomes a hold."""
    for field in FIELDS:
        for resource in sorted(set(after[field]) | set(before[field])):
            old, new = before[field].get(resource), after[field].get(resource)
            code, note = notes.get((name, field, resource), ("forecast", ""))
            if new is not None and new != old:
                changes.append(FieldChange(name, field, resource, old, new, note, code))
            elif code not in TARGET_CODES and code not in SHAPING_CODES and managed:
                held.append(Hold(name, note, code, field, resource))
