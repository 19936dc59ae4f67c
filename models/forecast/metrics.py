"""Forecast accuracy in the units people plan with, plus scale-free and interval metrics.

MAE is in GPUs (what a quota is made of); MASE divides by the in-sample MAE of the weekly seasonal naive
so series of 5 and 500 GPUs can be averaged; sMAPE is bounded (0–200) and defined at zero demand;
pinball loss at p50/p90 scores the quantiles a planner actually reads; coverage says whether the 80/95 %
bands mean what they claim. Missing actuals are NaN and never scored.
"""

from __future__ import annotations

import numpy as np

__all__ = ["coverage", "mae", "mase_scale", "pinball", "smape"]


def _valid(actual: np.ndarray, *others: np.ndarray) -> np.ndarray:
    mask = np.isfinite(actual)
    for other in others:
        mask &= np.isfinite(other)
    return np.asarray(mask, dtype=bool)


def mae(actual: np.ndarray, forecast: np.ndarray) -> float:
    m = _valid(actual, forecast)
    return float(np.mean(np.abs(actual[m] - forecast[m]))) if m.any() else float("nan")


def smape(actual: np.ndarray, forecast: np.ndarray) -> float:
    """Symmetric MAPE in percent; a point where both are 0 is a perfect 0, not 0/0."""
    m = _valid(actual, forecast)
    if not m.any():
        return float("nan")
    a, f = actual[m], forecast[m]
    denom = np.abs(a) + np.abs(f)
    ratio = np.divide(2 * np.abs(a - f), denom, out=np.zeros_like(denom), where=denom > 0)
    return float(100 * np.mean(ratio))


def pinball(actual: np.ndarray, quantile_forecast: np.ndarray, q: float) -> float:
    """Mean pinball (quantile) loss, in the units of the series."""
    m = _valid(actual, quantile_forecast)
    if not m.any():
        return float("nan")
    diff = actual[m] - quantile_forecast[m]
    return float(np.mean(np.maximum(q * diff, (q - 1) * diff)))


def coverage(actual: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    """Share of actuals inside ``[lo, hi]``."""
    m = _valid(actual, lo, hi)
    if not m.any():
        return float("nan")
    return float(np.mean((actual[m] >= lo[m]) & (actual[m] <= hi[m])))


def mase_scale(history: np.ndarray, observed: np.ndarray, season: int = 168) -> float:
    """In-sample MAE of the seasonal naive (falling back to daily, then naive, on short histories).

    Only pairs where both hours were observed count. Returns NaN for a constant history (MASE undefined).
    """
    for m in (season, 24, 1):
        if history.shape[0] > m:
            both = observed[m:] & observed[:-m]
            if both.sum() >= 2:
                scale = float(np.mean(np.abs(history[m:][both] - history[:-m][both])))
                return scale if scale > 0 else float("nan")
    return float("nan")
