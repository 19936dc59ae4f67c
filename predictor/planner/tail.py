"""Deserved ahead of forecast demand: the demand at quantile ``q`` of the forecast's distribution.

A queue's own work waits behind borrowers when its demand comes back above its ``deserved``: Volcano's
reclaim evicts only from queues above their deserved, so the GPUs a queue holds up to it are its own, and
demand above it queues until reclaim (or a finish) frees room. The planner therefore sets deserved *ahead*
of demand: the highest, over the planning horizon, of each step's ``q`` quantile. ``q`` trades the two
costs of that level (docs/design.md, "Deserved from the forecast's distribution"): a higher ``q`` leaves
less of the queue's demand waiting or on reclaimable borrowed GPUs, and more deserved idle, taken from the
other queues' shares.

The forecast gives five points of each step's distribution (``BAND_LEVELS``: lo-95 = 2.5 %, lo-80 = 10 %,
mean as the median, hi-80 = 90 %, hi-95 = 97.5 %). Between them the quantile function is interpolated
linearly in the *normal score* ``z = Φ⁻¹(p)``, beyond them extrapolated along the outermost segment: exact
for a normal forecast (mean + z·σ), piecewise-normal for a skewed one, and equal to a band at its own level
(``q = 0.9`` is ``hi-80``, the planner's earlier fixed column).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pandas as pd

from predictor.errors import InputError
from predictor.planner.objective import BAND_LEVELS

__all__ = [
    "DEFAULT_TAIL_QUANTILE",
    "TAIL_RANGE",
    "check_tail_quantile",
    "step_quantiles",
    "tail_demand",
    "tail_name",
]

# Open interval of allowed q: at 0.5 or below deserved would sit under the median demand (no longer "ahead"),
# and beyond 0.99 the level is extrapolated far past the forecast's outermost band (97.5 %).
TAIL_RANGE = (0.5, 0.99)

# FROZEN on 2026-12-04 from replays under the `loop` policy (row loop/auto), q in {0.8, 0.9, 0.95}, against static
# elastic quotas, e.g.
#   python -m bench.replay --traces philly --weeks 2 --windows 0 --rows static-elastic,loop/auto --tail-quantile 0.8
#   (each q; and --traces synthetic --weeks 1 --windows 0; --traces alibaba --weeks 1; --traces alibaba, whole).
# No q meets "p95 ≤ 1.1 × static elastic's + 10 min, reclaim-lost ≤, goodput ≥" on every trace; 0.8 dominates 0.9
# and exceeds static elastic's reclaim-lost by least. The table: docs/design.md, "Deserved from the forecast's
# distribution".
DEFAULT_TAIL_QUANTILE = 0.8

_Z = NormalDist().inv_cdf


def check_tail_quantile(q: float) -> float:
    """``q`` if it is inside ``TAIL_RANGE``; else a ``ValueError`` whose message is one line for the user."""
    low, high = TAIL_RANGE
    if not low < q < high:
        raise ValueError(
            f"must be between {low:g} and {high:g} (exclusive), got {q:g}: higher sizes more deserved "
            "(less wait behind borrowers, more idle quota)"
        )
    return q


def tail_name(q: float) -> str:
    """How plan reasons name the level: ``p90 ahead`` for 0.9, ``p97.5 ahead`` for 0.975."""
    return f"p{round(100 * q, 3):g} ahead"


def step_quantiles(steps: pd.DataFrame, q: float) -> np.ndarray:
    """Each row's ``q`` quantile, interpolated in normal score between the band columns ``steps`` holds.

    Needs two or more of ``BAND_LEVELS``' columns; crossed bands are made monotone (each at least the one
    below it). A row whose bands are all equal (a forecast with no spread) returns that value.
    """
    check_tail_quantile(q)
    columns = [c for c in BAND_LEVELS if c in steps.columns]
    if len(columns) < 2:
        raise InputError(f"planner.tail_quantile needs at least two of the forecast columns {', '.join(BAND_LEVELS)}")
    raw = steps[columns].apply(pd.to_numeric, errors="coerce").to_numpy(float)
    if not np.isfinite(raw).all():
        raise InputError("forecast frame has a missing or infinite value inside the planning horizon")
    values = np.maximum.accumulate(raw, axis=1)
    z = np.array([_Z(BAND_LEVELS[c]) for c in columns])
    target = _Z(q)
    # The segment [z_i, z_{i+1}] holding the target, or the outermost one on either side (extrapolation).
    i = int(np.clip(np.searchsorted(z, target) - 1, 0, len(z) - 2))
    share = (target - z[i]) / (z[i + 1] - z[i])
    out: np.ndarray = values[:, i] + share * (values[:, i + 1] - values[:, i])
    return out


def tail_demand(steps: pd.DataFrame, q: float) -> float:
    """The deserved level ahead of demand: the highest ``q`` quantile over the horizon's steps."""
    if steps.empty:
        raise InputError("planner.tail_quantile: no forecast step inside the planning horizon")
    return float(step_quantiles(steps, q).max())
