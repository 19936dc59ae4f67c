"""Elastic-worker advice: fewer workers where GPUs sit idle, more where progress lags and quota is idle.

Volcano jobs (``minAvailable``/task ``replicas``) and PyTorchJob elastic policies (``minReplicas``/
``maxReplicas``) can run with fewer workers than were asked for. Two signals say a workload could:
workers whose GPUs are idle at the stated risk (the GPU recommendation needs fewer workers' worth of GPUs,
and dropping idle GPUs costs no speed), and utilisation that stays below a threshold in most runs
(consolidating the same work on fewer workers at a target utilisation). The second has a cost that
depends on how the job scales, so the advice states the range: no slowdown if the remaining workers
speed up to the target utilisation (input-bound or latency-bound steps that overlap), up to
``workers / recommended − 1`` if each worker's throughput stays as measured.

Growth ("more workers where progress lags and the queue has idle quota"): DCGM and kube-state-metrics
carry no training-progress series, so progress is the run's duration against the workload's own: the
latest run lags when it took ``lag_share`` longer than the median of its earlier runs. More workers help
only if the lag is compute (its GPUs stayed busy, mean utilisation at or above ``busy_util_pct``; a slow
run with idle GPUs waits on something else) and only with quota to run on: the queue's idle quota is the
least ``deserved − allocated`` GPUs of its last ``quota_window_h`` hours (Volcano's queue gauges), so a
grown job is scheduled within the queue's own share instead of borrowing. The advice adds the workers
that would bring the run time back to usual at linear scaling, no more than the idle quota holds and at
most ``max_growth`` times the workers; the expected speed-up is stated as a ceiling (linear scaling;
communication-bound steps gain less). Without Volcano's queue gauges no growth is advised, and the
reason says why.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from models.frames import TIME, VALUE

__all__ = ["ElasticSettings", "idle_quota", "worker_advice"]


class ElasticSettings(BaseModel):
    """When a multi-worker workload is advised to shrink."""

    model_config = ConfigDict(extra="forbid")

    low_util_pct: float = Field(30.0, gt=0, le=100, description="Mean GPU utilisation below this is low.")
    sustained_share: float = Field(
        0.8, gt=0, le=1, description="Share of the workload's runs that must be low before shrinking on it."
    )
    min_runs: int = Field(3, ge=1, description="Runs needed before utilisation alone justifies fewer workers.")
    target_util_pct: float = Field(80.0, gt=0, le=100, description="Utilisation the remaining workers aim at.")
    lag_share: float = Field(
        0.25,
        gt=0,
        le=10,
        description="The latest run lags when it took this much longer than the workload's median earlier run.",
    )
    busy_util_pct: float = Field(
        60.0, gt=0, le=100, description="Mean GPU utilisation at or above which a lagging run is compute-bound."
    )
    max_growth: float = Field(2.0, ge=1, le=8, description="Most workers advised, as a multiple of today's.")
    quota_window_h: float = Field(
        6.0, gt=0, le=168, description="Hours over which a queue's quota must have stayed idle to grow into."
    )


def idle_quota(deserved: pd.DataFrame, allocated: pd.DataFrame, window_h: float) -> dict[str, float]:
    """Per queue: the least ``deserved − allocated`` GPUs (≥ 0) over the last ``window_h`` hours of both.

    Frames are Volcano's per-queue gauges in GPUs, long shape with a ``queue_name`` column; a queue or a
    time missing from either frame is not counted (no guess at idle quota).
    """
    # A NaN or infinite gauge (Prometheus returns them as such) is no number of idle GPUs: left out like a gap.
    deserved, allocated = (
        f[np.isfinite(pd.to_numeric(f[VALUE], errors="coerce"))] if not f.empty else f for f in (deserved, allocated)
    )
    if deserved.empty or allocated.empty:
        return {}
    keys = ["queue_name", TIME]
    both = (
        deserved.groupby(keys)[VALUE]
        .sum()
        .rename("deserved")
        .to_frame()
        .join(allocated.groupby(keys)[VALUE].sum().rename("allocated"), how="inner")
        .reset_index()
    )
    if both.empty:
        return {}
    recent = both[both[TIME] >= both[TIME].max() - pd.Timedelta(hours=window_h)]
    idle = (recent["deserved"] - recent["allocated"]).clip(lower=0).groupby(recent["queue_name"]).min()
    return {str(q): float(v) for q, v in idle.items()}


def _growth(
    g: pd.DataFrame, workers: int, per_worker: float, idle_gpus: float | None, settings: ElasticSettings
) -> tuple[int, str]:
    """(workers to add, advice) for a workload whose latest run lagged; (0, why not) or (0, "")."""
    if len(g) < settings.min_runs or per_worker <= 0:
        return 0, ""
    runtime = g["runtime_h"].to_numpy(np.float64)
    usual = float(np.median(runtime[:-1]))
    last, util = float(runtime[-1]), float(g["util_mean"].iloc[-1])
    lag = last / usual - 1 if usual > 0 else 0.0
    if lag < settings.lag_share or util < settings.busy_util_pct:
        return 0, ""
    queue = str(g["queue"].iloc[-1])
    lagging = f"the latest run took {last / usual:.2f}× its usual {usual:.2f} h with GPUs {util:.0f} % busy"
    if idle_gpus is None:
        return 0, f"{lagging}, but queue {queue}'s quota is unknown (no Volcano queue gauges): not grown"
    fits = math.floor(idle_gpus / per_worker + 1e-9)
    wanted = math.ceil(workers * lag - 1e-9)
    cap = math.floor(workers * settings.max_growth + 1e-9) - workers
    extra = max(min(fits, wanted, cap), 0)
    if extra == 0:
        return 0, f"{lagging}, but queue {queue} has {idle_gpus:g} idle GPUs of quota ({per_worker:g} per worker)"
    return extra, (
        f"{workers + extra} workers, {extra} more ({lagging}; queue {queue} kept {idle_gpus:g} GPUs of quota idle "
        f"over the last {settings.quota_window_h:g} h; Volcano replicas or PyTorchJob elastic "
        f"maxReplicas={workers + extra}): expected speed-up up to {extra / workers:.0%} at linear scaling"
    )


def worker_advice(
    g: pd.DataFrame, recommended_gpus: float, settings: ElasticSettings, idle_gpus: float | None = None
) -> tuple[float, str]:
    """(recommended workers, advice in words) for one workload's runs (start order); "" when unchanged.

    ``idle_gpus``: the idle quota of the workload's queue (``idle_quota``); None when it is not known.
    """
    last = g.iloc[-1]
    workers = int(last["pods"])
    if workers <= 1:
        return float(max(workers, 1)), ""
    per_worker = float(last["gpu_request"]) / workers
    busy = max(1, math.ceil(recommended_gpus / per_worker - 1e-9)) if per_worker > 0 else workers
    util = g["util_mean"].to_numpy(np.float64)
    low = len(g) >= settings.min_runs and float(np.mean(util < settings.low_util_pct)) >= settings.sustained_share
    by_util = max(1, math.ceil(workers * float(np.median(util)) / settings.target_util_pct)) if low else workers
    advised = min(workers, busy, by_util)
    if advised >= workers:
        extra, growth = _growth(g, workers, per_worker, idle_gpus, settings)
        return float(workers + extra), growth
    worst = workers / advised - 1 if by_util < busy else 0.0
    why = (
        f"GPUs of {workers - busy} worker(s) idle"
        if busy <= by_util
        else (
            f"utilisation below {settings.low_util_pct:g} % in {np.mean(util < settings.low_util_pct):.0%} of runs "
            f"(median {np.median(util):.0f} %)"
        )
    )
    return float(advised), (
        f"{advised} of {workers} workers ({why}; Volcano minAvailable/replicas or PyTorchJob elastic "
        f"minReplicas={advised}, maxReplicas={workers}): expected slowdown 0 %"
        + (f" to {worst:.0%}" if worst > 0 else "")
    )
