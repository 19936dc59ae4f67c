"""Recommendations for a report come from the planner itself, never from a second sizing rule.

The report shows what one planning cycle would do (forecast → targets → safety policy → desired
queues), so its numbers are those ``predictor plan`` and the loop produce on the same data. This module
only adapts: report inputs → Volcano Queue objects for the planner, a ``QueuePlan`` → a recommendation
table with one reason per queue.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from models.frames import ID, TIME, VALUE
from predictor.planner import (
    MANAGED_ANNOTATION,
    PlannerSettings,
    QueuePlan,
    forecast_targets,
    plan_queues,
    queues_from_list,
)
from predictor.reports.inputs import ReportInputs
from predictor.reports.model import DEFAULT_RESOURCE

__all__ = ["node_objects", "plan_recommendations", "queue_objects", "recommendations_from_plan"]


def _quantity(value: float) -> str:
    return f"{value:g}"


def queue_objects(inputs: ReportInputs) -> list[dict[str, Any]]:
    """Volcano Queue objects (as ``kubectl get queues -o json`` lists them) from the quota table.

    ``status.allocated`` is the newest hourly allocation, so the planner's never-below-allocated rule
    sees what the cluster held at the end of the history.
    """
    allocated = inputs.allocated.sort_values(TIME).groupby(ID).tail(1).set_index(ID)[VALUE]
    objects = []
    for row in inputs.quotas.sort_values("queue").to_dict("records"):
        name, resource = str(row["queue"]), str(row.get("resource", DEFAULT_RESOURCE))
        spec: dict[str, Any] = {"weight": 1, "reclaimable": True, "deserved": {resource: _quantity(row["deserved"])}}
        if math.isfinite(float(row["capability"])):
            spec["capability"] = {resource: _quantity(row["capability"])}
        if float(row["guarantee"]) > 0:
            spec["guarantee"] = {"resource": {resource: _quantity(row["guarantee"])}}
        used = float(allocated.get(name, 0.0))
        objects.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                # The report plans every queue of the cluster it was given: each one opts in.
                "metadata": {"name": name, "annotations": {MANAGED_ANNOTATION: "true"}},
                "spec": spec,
                "status": {"state": "Open", "allocated": {resource: _quantity(round(used, 3))}},
            }
        )
    return objects


def node_objects(total_gpus: float, resource: str = DEFAULT_RESOURCE) -> dict[str, Any]:
    """One Ready node standing for the cluster's allocatable GPUs (all the planner's Σ-guarantee rule needs;
    Ready, as the GPUs the metrics count are: the loop's first-cycle capacity check reads node conditions)."""
    status = {"allocatable": {resource: _quantity(total_gpus)}, "conditions": [{"type": "Ready", "status": "True"}]}
    return {"items": [{"metadata": {"name": "cluster"}, "status": status}]}


def recommendations_from_plan(plan: QueuePlan, quotas: pd.DataFrame) -> pd.DataFrame:
    """``queue, resource, guarantee, deserved, capability, reason, code`` per quota row, from a plan."""
    rows = []
    for q in quotas.sort_values("queue").to_dict("records"):
        name, resource = str(q["queue"]), str(q.get("resource", DEFAULT_RESOURCE))
        desired = plan.desired.get(name)
        values = {f: float(q[f]) for f in ("guarantee", "deserved", "capability")}
        if desired is not None:
            for f in values:
                values[f] = float(desired.get(f).get(resource, values[f]))
        changes = [c for c in plan.changes if c.queue == name and c.resource == resource]
        holds = [h for h in plan.held if h.queue == name]
        main = next((c for c in changes if c.field == "deserved"), None)
        if main is not None:
            reason, code = main.reason, main.code
        elif holds:
            reason, code = holds[0].reason, holds[0].code
        elif changes:  # deserved stays; say which other field moves, so the reason matches the numbers
            other = changes[0]
            before = "unset" if other.before is None else f"{other.before:g}"
            reason = f"deserved kept; {other.field} {before} → {other.after:g} ({other.reason})"
            code = other.code
        else:
            reason, code = "keep: the forecast is inside the dead band", "dead_band"
        rows.append({"queue": name, "resource": resource, **values, "reason": reason, "code": code})
    return pd.DataFrame(rows, columns=["queue", "resource", "guarantee", "deserved", "capability", "reason", "code"])


def plan_recommendations(
    inputs: ReportInputs, forecast: pd.DataFrame, settings: PlannerSettings, *, now: pd.Timestamp | None = None
) -> tuple[pd.DataFrame, QueuePlan]:
    """One planning cycle at ``now`` (default: the end of the history) and its recommendation table."""
    now = inputs.as_of if now is None else now
    queues = queues_from_list(queue_objects(inputs), source="report quotas")
    targets = forecast_targets(forecast, settings, now=now)
    plan = plan_queues(queues, targets, settings, now=now, allocatable={settings.resource: inputs.total_gpus})
    return recommendations_from_plan(plan, inputs.quotas), plan
