"""Elastic-worker advice: fewer workers for multi-worker workloads whose GPUs sit idle or stay barely busy.

Volcano jobs (``minAvailable``/task ``replicas``) and PyTorchJob elastic policies (``minReplicas``/
``maxReplicas``) can run with fewer workers than were asked for. Two signals say a workload could:
workers whose GPUs are idle at the stated risk (the GPU recommendation needs fewer workers' worth of GPUs,
and dropping idle GPUs costs no speed), and utilisation that stays below a threshold in most runs
(consolidating the same work on fewer workers at a target utilisation). The second has a cost that
depends on how the job scales, so the advice states the range: no slowdown if the remaining workers
speed up to the target utilisation (input-bound or latency-bound steps that overlap), up to
``workers / recommended − 1`` if each worker's throughput stays as measured. Growth advice ("more
workers where progress lags and the queue has idle quota") needs training-progress and queue-quota
series that right-sizing does not read yet: it is not given.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ElasticSettings", "worker_advice"]


class ElasticSettings(BaseModel):
    """When a multi-worker workload is advised to shrink."""

    model_config = ConfigDict(extra="forbid")

    low_util_pct: float = Field(30.0, gt=0, le=100, description="Mean GPU utilisation below this is low.")
    sustained_share: float = Field(
        0.8, gt=0, le=1, description="Share of the workload's runs that must be low before shrinking on it."
    )
    min_runs: int = Field(3, ge=1, description="Runs needed before utilisation alone justifies fewer workers.")
    target_util_pct: float = Field(80.0, gt=0, le=100, description="Utilisation the remaining workers aim at.")


def worker_advice(g: pd.DataFrame, recommended_gpus: float, settings: ElasticSettings) -> tuple[float, str]:
    """(recommended workers, advice in words) for one workload's runs (start order); "" when unchanged."""
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
        return float(workers), ""
    worst = workers / advised - 1 if by_util < busy else 0.0
    why = f"GPUs of {workers - busy} worker(s) idle" if busy <= by_util else (
        f"utilisation below {settings.low_util_pct:g} % in {np.mean(util < settings.low_util_pct):.0%} of runs "
        f"(median {np.median(util):.0f} %)")
    return float(advised), (
        f"{advised} of {workers} workers ({why}; Volcano minAvailable/replicas or PyTorchJob elastic "
        f"minReplicas={advised}, maxReplicas={workers}): expected slowdown 0 %"
        + (f" to {worst:.0%}" if worst > 0 else "")
    )
