"""The report's energy section: GPU energy per queue, and what the advised power caps would save.

Right-sizing gives energy per workload (``energy_saving_kwh_week`` at the power cap it advises, from
``predictor.rightsize.energy``) and per run (``energy_kwh``: DCGM power × run time). A capacity owner
thinks in queues, so the report sums both per queue: the energy the queue's runs drew in the window
right-sizing read, and the saving per week if every advised cap were applied. Without DCGM power series
there is no energy number, and the section says so instead of showing zeros.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["ENERGY_COLUMNS", "EnergyRow", "energy_rows", "has_energy"]

# Columns of the right-sizing table (``rightsize_savings``) this section reads.
ENERGY_COLUMNS = ("queue", "energy_kwh", "energy_saving_kwh_week")


@dataclass(frozen=True)
class EnergyRow:
    """One queue: GPU energy its runs drew (kWh), the saving at the advised caps (kWh/week), caps advised."""

    queue: str
    energy_kwh: float | None
    energy_saving_kwh_week: float | None
    capped_workloads: int


def _total(values: pd.Series) -> float | None:
    finite = pd.to_numeric(values, errors="coerce").to_numpy(np.float64)
    finite = finite[np.isfinite(finite)]
    return round(float(finite.sum()), 3) + 0.0 if finite.size else None


def energy_rows(rightsize: pd.DataFrame | None) -> tuple[EnergyRow, ...]:
    """Per queue, sorted by energy drawn (largest first); () when the table carries no energy columns."""
    if rightsize is None or rightsize.empty or any(c not in rightsize.columns for c in ENERGY_COLUMNS):
        return ()
    rows = []
    for queue, g in rightsize.groupby(rightsize["queue"].astype(str), sort=True):
        saving = pd.to_numeric(g["energy_saving_kwh_week"], errors="coerce")
        rows.append(EnergyRow(str(queue), _total(g["energy_kwh"]), _total(saving), int((saving > 0).sum())))
    return tuple(sorted(rows, key=lambda r: (-(r.energy_kwh or 0.0), r.queue)))


def has_energy(rows: tuple[EnergyRow, ...]) -> bool:
    """Whether any queue has an energy number (DCGM power series were present)."""
    return any(r.energy_kwh is not None and math.isfinite(r.energy_kwh) for r in rows)
