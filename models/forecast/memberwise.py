"""``auto``'s intervals: each pool member's bands conformalised on its own backtest errors, then pooled.

Why per member: the errors a conformal step learns from must be as fresh as the forecast it is applied to.
A baseline is refit at every origin, so each of its backtest windows is as fresh as the one served, and
all of them calibrate it. The LSTM is the costly member: ``auto`` trains one backtest network, and when it
was trained at the oldest of the 3 weekly origins and fed the newer ones (``models.forecast.frozen``), its
newer windows met a network 7 and 14 days stale while the served network is fresh, and the calibration
learnt those staler errors. So a slow member (``backtest_frozen``) is now backtested once, at the *newest*
origin, by a network trained there (as fresh as the served one, the same one training), and calibrated on
that window alone; the others on all of theirs; the shifted bands are then weighted like the means.

Measured held out (``bench/forecast.py --outer 8 --frozen --calibration fresh``, docs/design.md): 80 %
bands covered 0.818 / 0.816 / 0.790 on Philly / Alibaba / simulated queues (shipped before: 0.898 /
0.878 / 0.801 with the same networks), 95 % 0.943 / 0.907 / 0.936 (Alibaba's trend under-covers).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from models.forecast.base import Bands, PointForecast
from models.forecast.selection import cqr_shift

__all__ = ["FRESH_WINDOWS", "calibrate_members", "member_scores"]

FRESH_WINDOWS = 1  # backtest windows of a slow member: the newest, by a network trained at its origin


def member_scores(records: pd.DataFrame, members: list[str], levels: list[int]) -> dict[str, dict[int, np.ndarray]]:
    """Per member and level: CQR nonconformity scores ``max(lo − y, y − hi)`` over every window it was
    backtested on (observed actuals only). ``records``: one series' backtest records."""
    out: dict[str, dict[int, np.ndarray]] = {}
    for name in members:
        rows = records[(records["model"] == name) & records["actual"].notna()]
        if rows.empty:
            continue
        y = rows["actual"].to_numpy(float)
        out[name] = {
            level: np.maximum(rows[f"lo-{level}"].to_numpy(float) - y, y - rows[f"hi-{level}"].to_numpy(float))
            for level in levels
        }
    return out


def calibrate_members(
    weights: Mapping[str, float],
    members: Mapping[str, PointForecast],
    scores: Mapping[str, Mapping[int, np.ndarray]],
    levels: tuple[int, ...],
    gamma: float,
) -> Bands:
    """The served bands: every member's band moved out or in by its own CQR shift (left as it is when its
    evidence is too thin or the level was not backtested), then the members weighted like the means."""
    out: Bands = {}
    for level in levels:
        lo: np.ndarray | float = 0.0
        hi: np.ndarray | float = 0.0
        for name, weight in weights.items():
            m_lo, m_hi = members[name][1][level]
            s = scores.get(name, {}).get(level)
            q = cqr_shift(s, level, gamma) if s is not None else None
            shift = q if q is not None else 0.0
            lo = lo + weight * (np.asarray(m_lo, dtype=float) - shift)
            hi = hi + weight * (np.asarray(m_hi, dtype=float) + shift)
        out[level] = (np.asarray(lo, dtype=float), np.asarray(hi, dtype=float))
    return out
