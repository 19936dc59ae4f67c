"""What a loop cycle did (``CycleReport``), as a plain record (what it plans from is ``planstep.Inputs``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from predictor.actuators.audit import AuditRecord
from predictor.actuators.volcano import Outcome
from predictor.planner import QueuePlan

__all__ = ["CycleReport"]


@dataclass
class CycleReport:
    """What a cycle did."""

    cycle: str
    mode: str
    plan: QueuePlan | None = None
    hold: tuple[str, str] | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    skipped: bool = False
    recovered: list[AuditRecord] = field(default_factory=list)
    standby: str = ""  # why this instance did nothing: another loop holds the lock or the Lease
    modes: dict[str, str] = field(default_factory=dict)  # managed queue → recommend | apply
    recommended: list[Outcome] = field(default_factory=list)  # annotation patches of recommend-mode queues
