"""What a loop cycle plans from (``Inputs``) and what it did (``CycleReport``), as plain records."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from predictor.actuators.audit import AuditRecord
from predictor.actuators.volcano import Outcome
from predictor.loop.demand import DemandPrediction, model_uri
from predictor.planner import QueuePlan

__all__ = ["CycleReport", "Inputs"]


@dataclass
class Inputs:
    """What a cycle plans from: the forecast, its model versions, a hold of every queue, per-queue holds, demand."""

    forecast: pd.DataFrame | None = None
    versions: dict[str, str] = field(default_factory=dict)
    hold: tuple[str, str] | None = None
    held: dict[str, tuple[str, str]] = field(default_factory=dict)
    demand: DemandPrediction | None = None

    def models(self) -> dict[str, str]:
        """Family → model URI of every model served this cycle (forecast and demand)."""
        versions = {**self.versions, **(self.demand.versions if self.demand else {})}
        return {family: model_uri(family, str(v)) for family, v in sorted(versions.items())}


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
