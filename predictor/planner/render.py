"""Desired state back into Kubernetes shapes: the full desired Queue object and its merge patch.

Only resources the plan touches are rewritten, so hand-set values (``memory: 2Ti``) keep their spelling;
all three quota fields of a touched resource go in the same patch, because the Volcano webhook checks
``guarantee ≤ deserved ≤ capability`` on the object after the patch.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from predictor.planner.decisions import FieldChange
from predictor.planner.quantity import format_quantity
from predictor.planner.state import QueueState

__all__ = ["desired_object", "merge_patch", "touched_resources"]


def touched_resources(changes: Iterable[FieldChange], queue: str) -> set[str]:
    return {c.resource for c in changes if c.queue == queue and c.resource is not None}


def merge_patch(
    desired: QueueState, resources: Iterable[str], *, weight: bool = False, resource_version: str | None = None
) -> dict[str, Any]:
    """A JSON merge patch setting the three quota fields of ``resources`` (and ``weight``) to ``desired``."""
    spec: dict[str, Any] = {}
    for resource in sorted(resources):
        for name in ("deserved", "capability"):
            value = desired.get(name).get(resource)
            if value is not None:
                spec.setdefault(name, {})[resource] = format_quantity(value)
        guarantee = desired.guarantee.get(resource)
        if guarantee is not None:
            spec.setdefault("guarantee", {}).setdefault("resource", {})[resource] = format_quantity(guarantee)
    if weight:
        spec["weight"] = desired.weight
    patch: dict[str, Any] = {"spec": spec}
    if resource_version is not None:
        # Optimistic concurrency: the server answers 409 if the queue changed since it was read.
        patch["metadata"] = {"resourceVersion": resource_version}
    return patch


def _merge(target: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value) if isinstance(value, Mapping | list) else value
    return target


def apply_merge_patch(obj: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7386 merge patch applied to a copy of ``obj``."""
    return _merge(copy.deepcopy(dict(obj)), patch)


def desired_object(live: Mapping[str, Any], desired: QueueState, changes: Iterable[FieldChange]) -> dict[str, Any]:
    """The full Queue object after the plan (live object + the patch), without server-owned metadata."""
    changes = list(changes)
    resources = touched_resources(changes, desired.name)
    weight = any(c.field == "weight" and c.queue == desired.name for c in changes)
    obj = apply_merge_patch(live, merge_patch(desired, resources, weight=weight))
    meta = obj.get("metadata") or {}
    for owned in ("managedFields", "uid", "creationTimestamp", "generation", "resourceVersion"):
        meta.pop(owned, None)
    obj.setdefault("apiVersion", "scheduling.volcano.sh/v1beta1")
    obj.setdefault("kind", "Queue")
    return obj
