"""Per-queue mode in the loop: which planned queues are resized and which only get their recommendation.

Why per queue: adoption goes one queue at a time. The settings give the default
(``actuators.queues.mode``); a queue's ``gpu-capacity-predictor/mode`` annotation overrides it, so a team
switches its own queue to ``apply`` with one ``kubectl annotate`` once the recommendations have earned
trust. Recommend-mode queues never reach the quota patch path: their changes are taken out of the plan
the actuator applies, and their recommendation goes to ``predictor.actuators.recommend`` instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from predictor.actuators import Change
from predictor.actuators.recommend import (
    RECOMMENDATION_KEYS,
    annotate_change,
    queue_mode,
    recommendation,
    resources_of,
)
from predictor.planner import QueuePlan

__all__ = ["RECOMMEND_OUTCOMES", "annotation_changes", "queue_modes", "to_apply"]

# The audit outcome of an annotation patch: never "applied" or "dry-run-ok", which start cooldowns and
# which ``predictor rollback`` reverts; a recommendation changes no quota.
RECOMMEND_OUTCOMES = {"applied": "recommended", "dry-run-ok": "recommend-dry-run"}


def queue_modes(plan: QueuePlan, objects: Sequence[Mapping[str, Any]], default: str) -> dict[str, str]:
    """Queue → ``recommend`` | ``apply`` for every managed queue of the plan."""
    by_name = {str((o.get("metadata") or {}).get("name")): o for o in objects}
    return {name: queue_mode(by_name.get(name, {}), default) for name in plan.desired}


def to_apply(plan: QueuePlan, modes: Mapping[str, str]) -> QueuePlan:
    """The plan with only the changes of apply-mode queues (what the quota patch path may send)."""
    return replace(plan, changes=tuple(c for c in plan.changes if modes.get(c.queue) == "apply"))


def annotation_changes(
    plan: QueuePlan,
    objects: Sequence[Mapping[str, Any]],
    modes: Mapping[str, str],
    *,
    models: Mapping[str, str],
    resource: str,
    at: str,
) -> list[Change]:
    """One ``annotate-queue`` change per recommend-mode queue whose annotations would change, and one per
    apply-mode queue still carrying a recommendation from its recommend days (a stale one would mislead)."""
    by_name = {str((o.get("metadata") or {}).get("name")): o for o in objects}
    changes, held = _by_queue(plan)
    out = []
    for name in sorted(n for n, m in modes.items() if m == "apply"):
        cleared = annotate_change(name, by_name.get(name, {}), dict.fromkeys(RECOMMENDATION_KEYS), None)
        if cleared is not None:
            out.append(replace(cleared, reason="recommendation annotations removed: the queue is in apply mode"))
    for name in sorted(n for n, m in modes.items() if m == "recommend"):
        desired, mine = plan.desired[name], changes.get(name, [])
        wanted = recommendation(desired, mine, held.get(name, []), resources_of(desired, mine, resource), models)
        change = annotate_change(name, by_name.get(name, {"metadata": {"name": name}}), wanted, at)
        if change is not None:
            out.append(change)
    return out


def _by_queue(plan: QueuePlan) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    changes: dict[str, list[Any]] = {}
    held: dict[str, list[Any]] = {}
    for c in plan.changes:
        changes.setdefault(c.queue, []).append(c)
    for h in plan.held:
        held.setdefault(h.queue, []).append(h)
    return changes, held
