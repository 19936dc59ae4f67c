"""Rolling back a cycle: the quota values a cycle replaced, restored from the audit log through the actuator.

Why from the audit log: every applied change is recorded there with its before and after values, so undo
needs no snapshot. Why through the actuator: a rollback is a quota change like any other — merge patch with
the resourceVersion read, CRD schema and ordering checked before sending, shrinking queues first,
``dryRun=All`` unless asked to write, intent before and outcome after in the audit log. A queue whose
quota moved again since the cycle (a later cycle, a person) is not touched: restoring an older value over
a newer decision is a new decision, and is left to whoever makes it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from predictor.actuators import Change
from predictor.actuators.audit import AuditLog
from predictor.errors import InputError
from predictor.planner import merge_patch, parse_quantity, queue_from_object
from predictor.planner.state import FIELDS

__all__ = ["ROLLBACK", "Restore", "plan_rollback"]

ROLLBACK = "rollback"  # the audit code of a rollback's records (never rolled back themselves)


@dataclass(frozen=True)
class Restore:
    """One queue of a rollback: what the cycle changed, what the queue holds now, and the patch (if any)."""

    queue: str
    fields: tuple[tuple[str, str | None, float | None, float, float | None], ...]  # field, resource, before, after, now
    change: Change | None
    note: str = ""  # why there is no patch


def _live(spec: Mapping[str, Any], field: str, resource: str | None) -> float | None:
    if field == "weight":
        weight = spec.get("weight")
        return float(weight) if isinstance(weight, int) else None
    source = (spec.get("guarantee") or {}).get("resource") if field == "guarantee" else spec.get(field)
    value = (source or {}).get(resource)
    return None if value is None else parse_quantity(value, what=f"{field}[{resource}]")


def _same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and math.isclose(a, b, abs_tol=1e-9))


def cycle_changes(audit: AuditLog, cycle: str, queue: str | None, cluster: str | None = None) -> list[dict[str, Any]]:
    """The quota changes ``cycle`` applied (``queue``'s alone when given); ``InputError`` naming what is unknown."""
    records = [r for r in audit.of(cluster) if r.get("cycle") == cycle]
    if not records:
        raise InputError(f"--cycle {cycle}: no such cycle in the audit log {audit.path}")
    applied = [
        r
        for r in records
        if r.get("outcome") == "applied" and r.get("code") != ROLLBACK and r.get("field") in (*FIELDS, "weight")
    ]
    if queue is not None:
        changed = sorted({str(r["queue"]) for r in applied})
        applied = [r for r in applied if r.get("queue") == queue]
        if not applied:
            what = f"it resized {', '.join(changed)}" if changed else "it resized no queue"
            raise InputError(f"--queue {queue}: cycle {cycle} did not resize that queue ({what})")
    if not applied:
        raise InputError(f"--cycle {cycle}: the cycle resized no queue, there is nothing to roll back")
    return applied


def plan_rollback(
    records: Sequence[Mapping[str, Any]], live: Mapping[str, Mapping[str, Any]], cycle: str
) -> list[Restore]:
    """One ``Restore`` per queue: a ``patch-queue`` change back to the before-values, or why there is none."""
    by_queue: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        by_queue.setdefault(str(r["queue"]), []).append(r)
    out = []
    for name, mine in sorted(by_queue.items()):
        obj = live.get(name)
        if obj is None:
            out.append(Restore(name, (), None, "the queue no longer exists"))
            continue
        spec = obj.get("spec") or {}
        fields = tuple(
            (
                str(r["field"]),
                r.get("resource"),
                None if r.get("before") is None else float(r["before"]),
                float(r["after"]),
                _live(spec, str(r["field"]), r.get("resource")),
            )
            for r in mine
        )
        out.append(_restore(name, obj, fields, cycle))
    return out


def _restore(
    name: str,
    obj: Mapping[str, Any],
    fields: tuple[tuple[str, str | None, float | None, float, float | None], ...],
    cycle: str,
) -> Restore:
    if all(_same(now, before) for _, _, before, _, now in fields):
        return Restore(name, fields, None, f"already as before cycle {cycle}")
    moved = [f"{f}[{r}] is {now:g}, the cycle set {after:g}" for f, r, _, after, now in fields if not _same(now, after)]
    if moved:
        return Restore(name, fields, None, f"changed since the cycle ({'; '.join(moved)}): not rolled back")
    if any(before is None for _, _, before, _, _ in fields):
        return Restore(name, fields, None, "a field was unset before the cycle: unset it by hand")
    state = queue_from_object(obj, source="live queue")
    values = {f: dict(state.get(f)) for f in FIELDS}
    weight = state.weight
    for f, r, before, _, _ in fields:
        assert before is not None
        if f == "weight":
            weight = int(before)
        elif r is not None:
            values[f][r] = before
    state = replace(
        state,
        weight=weight,
        guarantee=values["guarantee"],
        deserved=values["deserved"],
        capability=values["capability"],
    )
    resources = sorted({r for f, r, _, _, _ in fields if r is not None})
    spec = merge_patch(state, resources, weight=any(f == "weight" for f, *_ in fields))["spec"]
    planned = {f: {r: _live(obj.get("spec") or {}, f, r) for r in resources} for f in FIELDS}
    reason = "; ".join(f"{f}[{r}] {after:g}→{before:g}" for f, r, before, after, _ in fields)
    change = Change(
        actuator="volcano",
        target=name,
        action="patch-queue",
        # The values the queue holds now: a queue edited between this read and the patch is not overwritten.
        before={
            "resourceVersion": (obj.get("metadata") or {}).get("resourceVersion"),
            "resources": resources,
            "spec": {},
            "planned": planned,
        },
        after={"spec": spec},
        reason=f"rollback of cycle {cycle}: {reason}",
    )
    return Restore(name, fields, change)
