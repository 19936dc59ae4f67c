"""Pure planning: forecasts and demand predictions in, desired queue quotas and XDP profiles out.

Queue quotas: ``forecast_targets`` turns a forecast frame (and demand peaks) into raw targets,
``plan_queues`` runs the safety policy over the live queues and returns a ``QueuePlan`` (desired queues,
changes and holds with reasons, stabilisation memory), and ``check_invariants`` re-checks any desired
state independently. ``plan_cycle`` is those steps in order with the stale-data hold, as the loop and
``predictor plan`` both run them. Nothing here reads a clock, a file or the network.
"""

from __future__ import annotations

from predictor.planner.cycle import CyclePlan, capacity_drop, plan_cycle, stale_forecast, stale_series
from predictor.planner.decisions import REASON_CODES, FieldChange, Hold, Memory, QueuePlan
from predictor.planner.invariants import check_invariants
from predictor.planner.plan import plan_queues
from predictor.planner.quantity import format_quantity, from_milli, parse_quantity
from predictor.planner.render import apply_merge_patch, desired_object, merge_patch, touched_resources
from predictor.planner.settings import PROTECTED_QUEUES, PlannerSettings, QueueLimits
from predictor.planner.state import (
    MANAGED_ANNOTATION,
    QueueState,
    allocatable_from_nodes,
    gpu_nodes_not_ready,
    queue_from_object,
    queues_from_list,
)
from predictor.planner.targets import Target, forecast_resources, forecast_targets, targets_from_mapping

__all__ = [
    "MANAGED_ANNOTATION",
    "PROTECTED_QUEUES",
    "REASON_CODES",
    "CyclePlan",
    "FieldChange",
    "Hold",
    "Memory",
    "PlannerSettings",
    "QueueLimits",
    "QueuePlan",
    "QueueState",
    "Target",
    "allocatable_from_nodes",
    "apply_merge_patch",
    "capacity_drop",
    "check_invariants",
    "desired_object",
    "forecast_resources",
    "forecast_targets",
    "format_quantity",
    "from_milli",
    "gpu_nodes_not_ready",
    "merge_patch",
    "parse_quantity",
    "plan_cycle",
    "plan_queues",
    "queue_from_object",
    "queues_from_list",
    "stale_forecast",
    "stale_series",
    "targets_from_mapping",
    "touched_resources",
]
