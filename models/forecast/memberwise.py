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

A slow member's shift is learnt in units of its calibrating band and served in units of the served band
(``halfwidths``): the network calibrated on is another training than the one served, and a learnt band's
width changes from one training to the next, so a miss 12 GPUs outside a band of half-width 20 says "widen
by 60 %", not "widen by 12 GPUs". Traced on the bagged LSTM (session 9): on Alibaba's largest series the
calibrating network's 80 % band was 1.7–4.9 times as wide as the served network's at 7 scored origins, so
shifts learnt in GPUs narrowed the served band far too much (that series' 80 % coverage at the scored
origins: 0.81 raw, 0.50 served). Held out, relative shifts moved the pool's 80 % coverage on Alibaba from
0.747 to 0.799 (docs/design.md, "Forecasting": every trace, and where it still misses).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from models.forecast.base import Bands, PointForecast
from models.forecast.selection import cqr_shift

__all__ = ["FRESH_WINDOWS", "calibrate_members", "member_halfwidths", "member_scores"]

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


def member_halfwidths(records: pd.DataFrame, members: list[str], levels: list[int]) -> dict[str, dict[int, float]]:
    """Per member and level: the mean half-width of its band over the windows it was calibrated on (the
    rows ``member_scores`` scores). Only for the members whose shift is served relative to their band."""
    out: dict[str, dict[int, float]] = {}
    for name in members:
        rows = records[(records["model"] == name) & records["actual"].notna()]
        if rows.empty:
            continue
        out[name] = {
            level: float(np.mean(rows[f"hi-{level}"].to_numpy(float) - rows[f"lo-{level}"].to_numpy(float)) / 2)
            for level in levels
        }
    return out


def _shift(
    scores: np.ndarray | None, level: int, gamma: float, calibrating_half: float | None, band: tuple[Any, Any]
) -> float:
    """A member's CQR shift in GPUs: absolute, or (with the calibrating band's half-width) relative to it and
    scaled to the served band's mean half-width. 0 when the evidence is too thin."""
    if scores is None:
        return 0.0
    if calibrating_half is not None and np.isfinite(calibrating_half) and calibrating_half > 0:
        q = cqr_shift(np.asarray(scores, dtype=float) / calibrating_half, level, gamma)
        served_half = float(np.mean(np.asarray(band[1], dtype=float) - np.asarray(band[0], dtype=float)) / 2)
        return 0.0 if q is None or not np.isfinite(served_half) else q * max(served_half, 0.0)
    q = cqr_shift(scores, level, gamma)
    return q if q is not None else 0.0


def calibrate_members(
    weights: Mapping[str, float],
    members: Mapping[str, PointForecast],
    scores: Mapping[str, Mapping[int, np.ndarray]],
    levels: tuple[int, ...],
    gamma: float,
    halfwidths: Mapping[str, Mapping[int, float]] | None = None,
) -> Bands:
    """The served bands: every member's band moved out or in by its own CQR shift (left as it is when its
    evidence is too thin or the level was not backtested), then the members weighted like the means. A
    member in ``halfwidths`` is shifted relative to its band (see the module docstring)."""
    out: Bands = {}
    for level in levels:
        lo: np.ndarray | float = 0.0
        hi: np.ndarray | float = 0.0
        for name, weight in weights.items():
            m_lo, m_hi = members[name][1][level]
            half = (halfwidths or {}).get(name, {}).get(level)
            shift = _shift(scores.get(name, {}).get(level), level, gamma, half, (m_lo, m_hi))
            lo = lo + weight * (np.asarray(m_lo, dtype=float) - shift)
            hi = hi + weight * (np.asarray(m_hi, dtype=float) + shift)
        out[level] = (np.asarray(lo, dtype=float), np.asarray(hi, dtype=float))
    return out
