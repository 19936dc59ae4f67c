"""Pure planning: forecasts and demand predictions in, desired queue quotas and XDP profiles out.

Queue quotas: ``forecast_targets`` turns a forecast frame (and demand peaks) into raw targets,
``plan_queues`` runs the safety policy over the live queues and returns a ``QueuePlan`` (desired queues,
changes and holds with reasons, stabilisation memory), and ``check_invariants`` re-checks any desired
state independently. ``plan_cycle`` is those steps in order with the stale-data hold, as the loop and
``predictor plan`` both run them. Nothing here reads a clock, a file or the network.

Names are imported on first use (PEP 562): the XDP node agent imports ``predictor.planner.xdp_*`` and
must not pay for the pandas-based queue planner it never runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_LAZY = {
    "CyclePlan": "predictor.planner.cycle",
    "capacity_drop": "predictor.planner.cycle",
    "plan_cycle": "predictor.planner.cycle",
    "stale_forecast": "predictor.planner.cycle",
    "stale_series": "predictor.planner.cycle",
    "REASON_CODES": "predictor.planner.decisions",
    "FieldChange": "predictor.planner.decisions",
    "Hold": "predictor.planner.decisions",
    "Memory": "predictor.planner.decisions",
    "QueuePlan": "predictor.planner.decisions",
    "check_invariants": "predictor.planner.invariants",
    "plan_queues": "predictor.planner.plan",
    "format_quantity": "predictor.planner.quantity",
    "from_milli": "predictor.planner.quantity",
    "parse_quantity": "predictor.planner.quantity",
    "apply_merge_patch": "predictor.planner.render",
    "desired_object": "predictor.planner.render",
    "merge_patch": "predictor.planner.render",
    "touched_resources": "predictor.planner.render",
    "PROTECTED_QUEUES": "predictor.planner.settings",
    "PlannerSettings": "predictor.planner.settings",
    "QueueLimits": "predictor.planner.settings",
    "MANAGED_ANNOTATION": "predictor.planner.state",
    "QueueState": "predictor.planner.state",
    "allocatable_from_nodes": "predictor.planner.state",
    "gpu_nodes_not_ready": "predictor.planner.state",
    "queue_from_object": "predictor.planner.state",
    "queues_from_list": "predictor.planner.state",
    "Target": "predictor.planner.targets",
    "forecast_resources": "predictor.planner.targets",
    "forecast_targets": "predictor.planner.targets",
    "targets_from_mapping": "predictor.planner.targets",
}

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
