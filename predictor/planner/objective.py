"""The objective the planner optimises when it sizes deserved and guarantee, solved as a newsvendor.

A quota is held constant over the planning period (the next ``horizon_h`` hours, steps ``t = 1..T``) while
demand ``D_t`` is uncertain; the forecast gives its distribution per step. Per GPU-hour:

* demand above ``deserved`` runs on borrowed GPUs and is reclaimable: expected loss ``reclaim_gpu_h``
  (probability of being reclaimed × GPU-hours since the last checkpoint, restart included);
* demand above ``guarantee`` may wait when the cluster is full: cost ``wait_gpu_h``;
* quota above demand is idle quota: ``idle_gpu_h`` (a guaranteed GPU is withheld from every other queue;
  a deserved GPU is taken from the other queues' shares, which then only borrow it, reclaimably).

For a level ``q`` held over the period the expected cost is
``C(q) = Σ_t E[u·(D_t − q)⁺ + o·(q − D_t)⁺]``, convex in ``q``; ``C'(q) = Σ_t (o·F_t(q) − u·(1 − F_t(q)))``
is zero where ``(1/T) Σ_t F_t(q) = u / (u + o)``. So the optimum is the ``p = u/(u+o)`` quantile of the
*mixture* of the step distributions (the newsvendor's critical ratio): ``deserved`` at
``p_d = reclaim/(reclaim+idle)``, ``guarantee`` at ``p_g = wait/(wait+idle)``. ``F_t`` is the forecast's
quantile function through its bands (lo-95 = 2.5 %, lo-80 = 10 %, mean as the median, hi-80 = 90 %,
hi-95 = 97.5 %), linear between them, with the 2.5 % tails put on the outer bands. ``capability`` is a cap,
not a share, and keeps its own quantile (and the gang floor of ``predictor.planner.gangs``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from predictor.errors import InputError

__all__ = ["BAND_LEVELS", "Objective", "critical_ratio", "mixture_quantile"]

# Forecast columns and the probability level each stands for.
BAND_LEVELS = {"lo-95": 0.025, "lo-80": 0.10, "mean": 0.50, "hi-80": 0.90, "hi-95": 0.975}


class Objective(BaseModel):
    """Costs per GPU-hour the planner trades (module docstring); set ``planner.objective`` to use them."""

    model_config = ConfigDict(extra="forbid")

    reclaim_gpu_h: float = Field(
        4.0,
        gt=0,
        description="Expected GPU-hours lost per GPU-hour run above "
        "deserved (reclaim probability × work since the last checkpoint).",
    )
    wait_gpu_h: float = Field(1.0, gt=0, description="Cost of one GPU-hour of demand waiting above guarantee.")
    idle_gpu_h: float = Field(1.0, gt=0, description="Cost of one GPU-hour of quota left idle.")

    @property
    def deserved_level(self) -> float:
        return critical_ratio(self.reclaim_gpu_h, self.idle_gpu_h)

    @property
    def guarantee_level(self) -> float:
        return critical_ratio(self.wait_gpu_h, self.idle_gpu_h)


def critical_ratio(under: float, over: float) -> float:
    """The newsvendor's optimal service level: cost of too little ÷ (too little + too much)."""
    return under / (under + over)


def mixture_quantile(steps: pd.DataFrame, level: float) -> float:
    """The ``level`` quantile of the equal-weight mixture of the per-row forecast distributions.

    ``steps`` holds two or more of the band columns (``BAND_LEVELS``); the quantile function of each row
    is linear between its bands. Solved by bisection on the mixture CDF to 1e-6 GPUs.
    """
    columns = [c for c in BAND_LEVELS if c in steps.columns]
    if len(columns) < 2:
        raise InputError(f"planner.objective needs at least two of the forecast columns {', '.join(BAND_LEVELS)}")
    if steps.empty:
        raise InputError("planner.objective: no forecast step inside the planning horizon")
    levels = np.array([BAND_LEVELS[c] for c in columns])
    raw = steps[columns].apply(pd.to_numeric, errors="coerce").to_numpy(float)
    if not np.isfinite(raw).all():
        raise InputError("planner.objective: the forecast has a missing or infinite band inside the planning horizon")
    values = np.maximum.accumulate(raw, axis=1)  # crossed bands: keep monotone
    # The tails beyond the outer bands sit on them: F jumps from 0 to the outer level there.
    lows, highs = values[:, 0], values[:, -1]

    def cdf(x: float) -> float:
        per_row = [
            0.0 if x < lo else 1.0 if x >= hi else float(np.interp(x, row, levels))
            for row, lo, hi in zip(values, lows, highs, strict=True)
        ]
        return float(np.mean(per_row))

    lo, hi = float(lows.min()), float(highs.max())
    if cdf(lo) >= level:
        return lo
    while hi - lo > 1e-6:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if cdf(mid) >= level else (mid, hi)
    return hi
