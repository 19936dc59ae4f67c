"""What a planning cycle decides: field changes, holds (each with its reason) and stabilisation memory.

These are plain frozen records so a plan can be written to ``plan.json``, the audit log and metrics
without the planner knowing about any of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from predictor.planner.state import QueueState

__all__ = ["REASON_CODES", "SHAPING_CODES", "TARGET_CODES", "FieldChange", "Hold", "Memory", "QueuePlan"]

# Codes of rules that shape a target from the workload (predictor.planner.gangs): a field they moved that the
# queue already holds is no change and no hold either.
SHAPING_CODES = ("gang_floor", "whole_nodes", "pool", "steady_priority")
# Low-cardinality reason codes (metric labels); the free text of a reason carries the numbers.
REASON_CODES = (
    "forecast",
    "dead_band",
    "max_step",
    "cooldown",
    "stabilising",
    "below_allocated",
    "ordering",
    "parent_sum",
    "guarantee_sum",
    "capacity",
    "protected",
    "opted_out",
    "no_forecast",
    "stale_data",
    "missing_model",
    "source_down",
    "invalid_state",
    "capacity_drop",
    "demand",
    "borrow",
    "guarantee_held",
    "pending_raise",
    "rca_fault",  # the gpu-rca champion found a fault stalling the queue's jobs (predictor.loop.rca)
    *SHAPING_CODES,
)
# Codes of a change that went to its target unclipped, naming what set the target (predictor.planner.demand_rule).
TARGET_CODES = ("forecast", "demand", "borrow")


@dataclass(frozen=True)
class FieldChange:
    """One quota field of one queue moves from ``before`` to ``after`` (GPUs; weight as a count)."""

    queue: str
    field: str  # guarantee | deserved | capability | weight
    resource: str | None
    before: float | None
    after: float
    reason: str
    code: str = "forecast"

    def to_dict(self) -> dict[str, Any]:
        # Every field is a scalar: a shallow dict equals ``asdict`` without its deep copy of each value.
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Hold:
    """A change the planner wanted or could not consider, and why it was not made."""

    queue: str
    reason: str
    code: str
    field: str | None = None
    resource: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


Series = tuple[tuple[float, float], ...]  # ((unix seconds, recommended value), ...)


@dataclass(frozen=True)
class Memory:
    """Recent raw recommendations per (queue, field, resource), for the stabilisation windows."""

    recommendations: Mapping[str, Series] = field(default_factory=dict)

    @staticmethod
    def key(queue: str, field_name: str, resource: str) -> str:
        return f"{queue}|{field_name}|{resource}"

    def to_json(self) -> dict[str, list[list[float]]]:
        return {k: [list(p) for p in v] for k, v in self.recommendations.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Memory:
        return cls({str(k): tuple((float(t), float(v)) for t, v in points) for k, points in data.items()})


@dataclass(frozen=True)
class QueuePlan:
    """The outcome of one cycle: desired queues (managed ones), changes, holds, and the new memory."""

    desired: Mapping[str, QueueState]
    changes: tuple[FieldChange, ...]
    held: tuple[Hold, ...]
    memory: Memory
    # Queues whose deserved this plan may set below what they hold (``planner.deserved_below_allocated``):
    # the actuator must not read that as a conflict when the live object moved on.
    below_allocated: frozenset[str] = frozenset()

    def changed_queues(self) -> list[str]:
        return sorted({c.queue for c in self.changes})

    def to_json(self) -> dict[str, Any]:
        """The ``plan.json`` document: ``{"changes": [...], "held": [...]}``."""
        return {"changes": [c.to_dict() for c in self.changes], "held": [h.to_dict() for h in self.held]}
