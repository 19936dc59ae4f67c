"""Recommendations with a stated risk: conformal upper bounds on a workload's next runs.

A percentile of past runs plus a fixed margin (VPA's p90 + 15 %, KRR's max + 15 %) says nothing about
how often the next run will need more; on a workload that grows, it under-sizes more and more. Here the
user states the risk ``R`` — the share of future runs allowed to need more than recommended — and the
bound is split-conformal: residuals of a simple forecast of each run (the mean of the workload's last
few runs, plus a drift when its runs keep growing) computed on the workload's *own* earlier runs, and
the ``⌈(n+1)(1−R)⌉``-th smallest residual added to the forecast of the next runs. Residuals rather than raw
values keep the guarantee under a trend. With fewer own residuals than ``R`` needs (``(1−R)/R``: 19 at
5 %, 49 at 2 %), residuals of similar workloads are pooled in (same queue and request, then the whole
cluster), and the evidence tier used is reported so ``confidence`` follows it. Pure numpy: the CLI,
the benchmark and the tests share it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["RiskBound", "conformal_quantile", "forecast_residuals", "needed_scores", "risk_bound"]

LEVEL_RUNS = 5  # the forecast of a run is the mean of the workload's last few runs
DRIFT_RUNS = 30  # drift is judged on this many recent runs
DRIFT_AGREEMENT = 0.75  # share of pairwise slopes that must be positive before a drift is trusted


def needed_scores(risk: float) -> int:
    """Fewest residuals whose ``⌈(n+1)(1−R)⌉``-th smallest exists (a finite conformal bound)."""
    return int(np.ceil((1 - risk) / risk - 1e-9))


def conformal_quantile(scores: np.ndarray, risk: float) -> float:
    """The split-conformal ``1 − risk`` quantile of ``scores``; +inf when there are too few of them."""
    s = np.sort(np.asarray(scores, dtype=np.float64)[np.isfinite(scores)])
    k = int(np.ceil((s.size + 1) * (1 - risk) - 1e-9))
    return float(s[k - 1]) if 0 < k <= s.size else float("inf")


def _drift(values: np.ndarray) -> float:
    """Growth per run when the recent runs clearly keep growing (Theil–Sen slope), else 0.

    Only upward drift is used: a shrinking workload is covered by its level, and a spurious downward
    slope would under-size the next run.
    """
    v = values[-DRIFT_RUNS:]
    if v.size < 6:
        return 0.0
    i, j = np.triu_indices(v.size, k=1)
    slopes = (v[j] - v[i]) / (j - i)
    if np.mean(slopes > 0) < DRIFT_AGREEMENT:
        return 0.0
    return float(max(np.median(slopes), 0.0))


def _forecast(history: np.ndarray, ahead: int) -> float:
    """The value ``ahead`` runs after the end of ``history`` (1 = the next run)."""
    last = history[-LEVEL_RUNS:]
    # The mean of the last runs sits (len+1)/2 runs behind the next one.
    return float(last.mean() + _drift(history) * ((last.size - 1) / 2 + ahead))


def forecast_residuals(values: np.ndarray) -> np.ndarray:
    """Residual (actual − forecast) of each run after the first, forecast from the runs before it only."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    return np.array([v[t] - _forecast(v[:t], 1) for t in range(1, v.size)], dtype=np.float64)


@dataclass(frozen=True)
class RiskBound:
    """An upper bound for a workload's next runs and the evidence behind it."""

    value: float  # +inf when no tier held enough residuals
    forecast: float
    margin: float
    scores: int  # residuals the margin was taken from
    tier: str  # "own", "similar", "cluster" or "none"


def risk_bound(values: np.ndarray, risk: float, peers: tuple[np.ndarray, ...] = (), *, ahead: int = 1) -> RiskBound:
    """Bound on the runs up to ``ahead`` runs from now from a workload's ordered ``values``.

    ``peers`` are residual pools of ever wider circles of similar workloads (e.g. same queue and request,
    then the cluster); each is tried, together with the workload's own residuals, until one holds
    enough for ``risk``.
    """
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return RiskBound(float("inf"), float("nan"), float("inf"), 0, "none")
    forecast = _forecast(v, max(ahead, 1))
    own = forecast_residuals(v)
    pools = [
        ("own", own),
        *((name, np.concatenate([own, p])) for name, p in zip(("similar", "cluster"), peers, strict=False)),
    ]
    for tier, pool in pools:
        margin = conformal_quantile(pool, risk)
        if np.isfinite(margin):
            return RiskBound(forecast + max(margin, 0.0), forecast, max(margin, 0.0), int(pool.size), tier)
    return RiskBound(float("inf"), forecast, float("inf"), int(pools[-1][1].size), "none")
