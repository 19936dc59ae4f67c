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

A slow member's narrowing is scaled to the band it is served on (``halfwidths``): the network calibrated on
is another training than the one served, and a learnt band's width changes from one training to the next. So
a shift inward, learnt in GPUs, is multiplied by the served band's mean half-width ÷ the calibrating band's,
over the leads both have, when that is below 1: a band that was too wide by 12 GPUs where it was 40 wide is
too wide by 6 where the served one is 20. A shift outward is served as learnt, and nothing is scaled up, so
the served band is never narrower than with shifts in GPUs: a calibrating band can be degenerate (a queue idle
before the newest origin has a band a hundredth of a GPU wide, and its misses scaled by that would widen the
served band a hundredfold), and a served band can be (a queue drained now), where scaling a widening by it
would drop the widening its misses asked for. Traced on the bagged LSTM: on Alibaba's largest
series the calibrating network's 80 % band was 1.7–4.9 times as wide as the served network's at 7 scored
origins, so shifts learnt in GPUs narrowed the served band far too much (that series' 80 % coverage at the
scored origins: 0.81 raw, 0.50 served). Scaled narrowing moved the served pool's 80 % coverage on Alibaba
from 0.747 to 0.799 (docs/design.md, "Forecasting": every trace, and where it still misses).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from models.forecast.base import Bands, PointForecast
from models.forecast.selection import cqr_shift

__all__ = [
    "FRESH_WINDOWS",
    "calibrate_members",
    "calibrate_pool",
    "member_halfwidths",
    "member_scores",
    "residual_bands",
    "scaled_shift",
]

FRESH_WINDOWS = 1  # backtest windows of a slow member: the newest, by a network trained at its origin
_BUCKET = 24  # leads pooled per conformal quantile (residual_bands): one day of an hourly horizon


def _observed(records: pd.DataFrame, members: list[str]) -> Iterator[tuple[str, pd.DataFrame]]:
    """Each member's backtest rows with an observed actual (members without any are left out)."""
    for name in members:
        rows = records[(records["model"] == name) & records["actual"].notna()]
        if not rows.empty:
            yield name, rows


def member_scores(records: pd.DataFrame, members: list[str], levels: list[int]) -> dict[str, dict[int, np.ndarray]]:
    """Per member and level: CQR nonconformity scores ``max(lo − y, y − hi)`` over every window it was
    backtested on (observed actuals only). ``records``: one series' backtest records."""
    out: dict[str, dict[int, np.ndarray]] = {}
    for name, rows in _observed(records, members):
        y = rows["actual"].to_numpy(float)
        out[name] = {
            level: np.maximum(rows[f"lo-{level}"].to_numpy(float) - y, y - rows[f"hi-{level}"].to_numpy(float))
            for level in levels
        }
    return out


def member_halfwidths(records: pd.DataFrame, members: list[str], levels: list[int]) -> dict[str, dict[int, np.ndarray]]:
    """Per member and level: its band's half-width at each lead (index ``lead - 1``), averaged over the windows
    it was calibrated on (the rows ``member_scores`` scores; NaN at a lead with none). Only for the members
    whose shift is scaled to the served band."""
    out: dict[str, dict[int, np.ndarray]] = {}
    for name, rows in _observed(records, members):
        lead = rows["lead"].to_numpy(int)
        out[name] = {}
        for level in levels:
            half = (rows[f"hi-{level}"].to_numpy(float) - rows[f"lo-{level}"].to_numpy(float)) / 2
            per_lead = pd.Series(half).groupby(lead).mean()
            out[name][level] = per_lead.reindex(range(1, int(lead.max()) + 1)).to_numpy(float)
    return out


def scaled_shift(
    scores: np.ndarray | None, level: int, gamma: float, calibrating: np.ndarray | None, band: tuple[Any, Any]
) -> float:
    """A member's CQR shift in GPUs, 0 when the evidence is too thin. With the calibrating band's half-widths
    per lead, a shift inward (< 0) is scaled by served ÷ calibrating half-width (means over the leads both
    have) when that is below 1: learnt against a wider band, it narrows the served one proportionally less. A
    shift outward, or anything unusable (no common lead, a width ≤ 0 or not finite), stays as learnt."""
    q = cqr_shift(scores, level, gamma) if scores is not None else None
    if q is None:
        return 0.0
    if calibrating is None:
        return q
    served = (np.asarray(band[1], dtype=float) - np.asarray(band[0], dtype=float)) / 2
    calib = np.asarray(calibrating, dtype=float).ravel()
    n = min(served.size, calib.size)
    both = np.isfinite(served[:n]) & np.isfinite(calib[:n])  # the leads both bands have
    if not both.any():
        return q
    wide = float(np.mean(calib[:n][both]))
    ratio = float(np.mean(served[:n][both])) / wide if wide > 0 else np.nan
    return q * ratio if q < 0 and np.isfinite(ratio) and 0 <= ratio < 1 else q


def calibrate_members(
    weights: Mapping[str, float],
    members: Mapping[str, PointForecast],
    scores: Mapping[str, Mapping[int, np.ndarray]],
    levels: tuple[int, ...],
    gamma: float,
    halfwidths: Mapping[str, Mapping[int, np.ndarray]] | None = None,
) -> Bands:
    """The served bands: every member's band moved out or in by its own CQR shift (left as it is when its
    evidence is too thin or the level was not backtested), then the members weighted like the means. A
    member in ``halfwidths`` has its shift scaled to its served band (``scaled_shift``; the module docstring)."""
    out: Bands = {}
    for level in levels:
        lo: np.ndarray | float = 0.0
        hi: np.ndarray | float = 0.0
        for name, weight in weights.items():
            m_lo, m_hi = members[name][1][level]
            half = (halfwidths or {}).get(name, {}).get(level)
            shift = scaled_shift(scores.get(name, {}).get(level), level, gamma, half, (m_lo, m_hi))
            lo = lo + weight * (np.asarray(m_lo, dtype=float) - shift)
            hi = hi + weight * (np.asarray(m_hi, dtype=float) + shift)
        out[level] = (np.asarray(lo, dtype=float), np.asarray(hi, dtype=float))
    return out


# The pool-level steps auto falls back on: one CQR over the served pool's scores (plans without
# per-member scores), and residual quantiles of the served mean for levels the backtest did not record.
def calibrate_pool(bands: Bands, scores: Mapping[int, np.ndarray], levels: tuple[int, ...], gamma: float) -> Bands:
    """Conformalised bands (CQR), two-sided: move each band by the adjusted quantile of its backtest
    nonconformity scores ``max(lo − y, y − hi)``, out when it missed too often, in when it was too wide,
    keeping the members' shape over the horizon."""
    out: Bands = {}
    for level in levels:
        lo, hi = bands[level]
        s = scores.get(level)
        q = cqr_shift(s, level, gamma) if s is not None else None
        if q is not None:
            lo, hi = lo - q, hi + q
        out[level] = (lo, hi)
    return out


def residual_bands(
    mean: np.ndarray, errors: np.ndarray, levels: tuple[int, ...], bucket: int = _BUCKET
) -> Bands | None:
    """Bands from residual quantiles pooled per ``bucket`` leads (a day of an hourly horizon), widening
    monotonically with the lead; None when no bucket has enough residuals."""
    horizon = mean.shape[0]
    width = errors.shape[1]
    n_buckets = -(-width // bucket)
    probs = np.array([p for lvl in levels for p in (0.5 - lvl / 200, 0.5 + lvl / 200)])
    q = np.full((n_buckets, probs.shape[0]), np.nan)
    for b in range(n_buckets):
        pooled = errors[:, b * bucket : (b + 1) * bucket].ravel()
        pooled = pooled[np.isfinite(pooled)]
        if pooled.size >= 12:
            q[b] = np.quantile(pooled, probs)
    if np.isnan(q).all():
        return None
    # fill buckets without enough residuals from the previous one; uncertainty does not shrink with lead
    for b in range(1, n_buckets):
        if np.isnan(q[b]).any():
            q[b] = q[b - 1]
    first = int(np.argmax(~np.isnan(q).any(axis=1)))
    q[:first] = q[first]
    q[:, 0::2] = np.minimum.accumulate(q[:, 0::2], axis=0)
    q[:, 1::2] = np.maximum.accumulate(q[:, 1::2], axis=0)
    leads = np.arange(horizon)
    which = np.minimum(leads // bucket, n_buckets - 1)
    grow = np.sqrt(np.maximum(leads + 1, width) / width)  # beyond the backtested horizon: random-walk growth
    per_lead = q[which] * grow[:, None]
    return {lvl: (mean + per_lead[:, 2 * i], mean + per_lead[:, 2 * i + 1]) for i, lvl in enumerate(levels)}
