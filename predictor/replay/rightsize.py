"""``rightsize+loop``: the GPU requests an admission mutation would set, from right-sizing the past.

Right-sizing (``predictor.rightsize.recommend``) runs on the runs of recurring workloads submitted before
the replay, with what each run used (a ``gpus_used`` column where the trace has one, else the simulator's
usage profiles: no public trace pairs requests with use). Jobs of those workloads submitted during the
replay then ask for the recommended GPUs, as a mutating webhook would rewrite them; jobs of workloads
without enough history keep their request. So right-sizing's gain is measured apart from the quotas: the
same loop plans both ``loop`` and ``rightsize+loop``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from predictor.rightsize import RightsizeSettings, recommend
from predictor.sim import GPU_TYPES
from predictor.sim.profiles import draw_profiles

__all__ = ["rightsized_jobs", "used_gpus", "workload_runs"]

_CARD = GPU_TYPES["H100"]


def used_gpus(jobs: pd.DataFrame, gpus_per_node: int, seed: int) -> np.ndarray:
    """GPUs each job keeps busy: the table's ``gpus_used`` where given (a measured trace), else the
    simulator's usage profile for the job (capped at the request either way)."""
    drawn = pd.Series(draw_profiles(jobs, gpus_per_node, seed).gpus_used.astype(float), index=jobs.index)
    if "gpus_used" in jobs.columns:
        drawn = pd.to_numeric(jobs["gpus_used"], errors="coerce").fillna(drawn)
    out: np.ndarray = np.minimum(drawn.to_numpy(dtype=float).clip(0), jobs["num_gpus"].to_numpy(dtype=float))
    return out


def workload_runs(jobs: pd.DataFrame, gpus_per_node: int, seed: int) -> pd.DataFrame:
    """A right-sizing run table (one run per job) from a job table and its simulated usage."""
    profiles = draw_profiles(jobs, gpus_per_node, seed)
    used = used_gpus(jobs, gpus_per_node, seed)
    start = jobs["submit"]
    runtime_s = jobs["duration_s"].to_numpy()
    mem = profiles.mem_frac * _CARD.memory_mib
    return pd.DataFrame(
        {
            "namespace": "default",
            "workload": jobs["workload"].astype(str).to_numpy(),
            "run": np.arange(len(jobs)),
            "job": jobs["job_id"].to_numpy(),
            "queue": jobs["queue"].to_numpy(),
            "gpu_type": _CARD.name,
            "pods": 1,
            "start": start.to_numpy(),
            "end": (start + pd.to_timedelta(runtime_s, unit="s")).to_numpy(),
            "runtime_h": runtime_s / 3600,
            "gpu_request": jobs["num_gpus"].to_numpy().astype(float),
            "gpus_used_p95": used,
            "gpus_used_max": used,
            "gpu_equiv_p95": used * profiles.util_mean / 100,
            "util_mean": profiles.util_mean,
            "util_p95": np.minimum(profiles.util_mean + 2 * profiles.util_sd, 100),
            "mem_peak_mib": mem,
            "mem_p99_mib": mem,
            "gpu_mem_total_mib": float(_CARD.memory_mib),
            "samples": np.maximum(1, np.ceil(runtime_s / 300)).astype(np.int64) * jobs["num_gpus"].to_numpy(),
        }
    )


def rightsized_jobs(jobs: pd.DataFrame, start: pd.Timestamp, gpus_per_node: int, seed: int) -> tuple[pd.DataFrame, int]:
    """``jobs`` with the requests of recurring workloads submitted from ``start`` on set to the recommendation.

    Returns the table and how many jobs were changed. Without a ``workload`` column every job is its own
    workload: nothing recurs and nothing changes.
    """
    if "workload" not in jobs.columns:
        return jobs, 0
    past = jobs[jobs["submit"] < start]
    recurring = past.groupby("workload")["job_id"].transform("size") >= 2
    past = past[recurring]
    if past.empty:
        return jobs, 0
    table = recommend(workload_runs(past.reset_index(drop=True), gpus_per_node, seed), RightsizeSettings())
    target = {
        str(w): float(g)
        for w, g in zip(table["workload"], table["recommended_gpus"], strict=True)
        if math.isfinite(float(g)) and g > 0
    }
    out = jobs.copy()
    later = (out["submit"] >= start) & out["workload"].astype(str).isin(target)
    new = out.loc[later, "workload"].astype(str).map(target).map(lambda g: max(1, math.ceil(g)))
    smaller = later.copy()
    smaller[later] = new.to_numpy() < out.loc[later, "num_gpus"].to_numpy()
    out.loc[smaller, "num_gpus"] = new[smaller[later].to_numpy()].to_numpy().astype(np.int64)
    return out, int(smaller.sum())
