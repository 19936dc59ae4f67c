"""Per-step what-if summary: allocation, real use, queueing and fragmentation of one run.

Two quota policies are compared on these numbers (GPU utilisation, queueing delay, fragmentation), so
they are computed from the same occupancy the metrics come from, not re-derived from Prometheus.
Fragmentation follows the FGD paper (Weng et al., ATC'23): the expected number of free GPUs that a task
drawn from the workload's size distribution could not use, because its node has too few free GPUs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from predictor.sim.occupancy import IDLE, Occupancy
from predictor.sim.scheduler import SchedulerResult
from predictor.sim.series import epoch_s

__all__ = ["fragmentation", "queue_summary", "summarise", "summary_totals"]


def fragmentation(free: np.ndarray, sizes: np.ndarray, probs: np.ndarray, gpus_per_node: int) -> np.ndarray:
    """FGD fragmentation per column of ``free`` (``[nodes, steps]`` free GPUs), in GPUs.

    A task of ``g <= gpus_per_node`` GPUs cannot use a node with fewer than ``g`` free; a multi-node task
    takes whole nodes, so for it every free GPU on a partly used node is stranded.
    """
    out = np.zeros(free.shape[1])
    for g, p in zip(sizes, probs, strict=True):
        stranded = (free < g) if g <= gpus_per_node else (free < gpus_per_node)
        out += p * (free * stranded).sum(axis=0)
    return out


def summarise(sched: SchedulerResult, o: Occupancy) -> pd.DataFrame:
    """One row per step: capacity, allocated/busy GPUs, pending demand, waits, utilisation, fragmentation."""
    grid = o.grid
    times = grid.times_s()
    g = o.cluster.gpus_per_node
    owner = o.owner
    ready_gpus = o.node_ready.sum(axis=0) * g
    allocated = (owner >= 0).sum(axis=0)
    busy = o.busy.sum(axis=0)
    free = o.node_view(owner == IDLE).sum(axis=1)
    sizes, counts = np.unique(np.minimum(o.jobs["num_gpus"].to_numpy(), 2 * g), return_counts=True)
    frag = fragmentation(free, sizes, counts / counts.sum(), g)
    idx = np.searchsorted(sched.timeline_s, times, side="right") - 1
    ok = idx >= 0
    pending_gpus = np.where(ok, sched.pending_gpus.sum(axis=1)[np.maximum(idx, 0)], 0) if len(idx) else idx
    pending_jobs = np.where(ok, sched.pending_jobs.sum(axis=1)[np.maximum(idx, 0)], 0) if len(idx) else idx
    a = sched.attempts
    start_s = epoch_s(a["start"])
    k = (start_s - grid.start_s) // grid.step_s
    inside = (k >= 0) & (k < grid.n_steps)
    started = np.bincount(k[inside], minlength=grid.n_steps)
    wait_sum = np.bincount(k[inside], weights=a["wait_s"].to_numpy()[inside], minlength=grid.n_steps)
    total_free = free.sum(axis=0)
    return pd.DataFrame(
        {
            "timestamp": pd.to_datetime(times, unit="s", utc=True),
            "capacity_gpus": ready_gpus,
            "allocated_gpus": allocated,
            "busy_gpus": busy,
            "pending_gpus": pending_gpus,
            "pending_jobs": pending_jobs,
            "jobs_started": started,
            "mean_wait_s": np.where(started > 0, wait_sum / np.maximum(started, 1), np.nan),
            "fragmented_gpus": frag,
            "fragmentation_rate": np.where(total_free > 0, frag / np.maximum(total_free, 1), 0.0),
            "allocation_rate": allocated / np.maximum(ready_gpus, 1),
        }
    )


def queue_summary(sched: SchedulerResult, o: Occupancy) -> pd.DataFrame:
    """Per queue and step: allocated/pending GPUs, pending jobs, quota, and the mean wait of jobs started."""
    times = o.grid.times_s()
    idx = np.searchsorted(sched.timeline_s, times, side="right") - 1
    qidx = np.searchsorted(sched.quota_s, times, side="right") - 1
    ok = idx >= 0
    a = sched.attempts
    k = (epoch_s(a["start"]) - o.grid.start_s) // o.grid.step_s
    frames = []
    for qi, queue in enumerate(sched.queue_names):

        def at(values: np.ndarray, qi: int = qi) -> np.ndarray:
            return np.where(ok, values[np.maximum(idx, 0), qi], 0) if len(values) else np.zeros(len(times))

        mine = (a["queue"].to_numpy() == queue) & (k >= 0) & (k < o.grid.n_steps)
        started = np.bincount(k[mine], minlength=o.grid.n_steps)
        waits = np.bincount(k[mine], weights=a["wait_s"].to_numpy()[mine], minlength=o.grid.n_steps)
        frames.append(
            pd.DataFrame(
                {
                    "timestamp": pd.to_datetime(times, unit="s", utc=True),
                    "queue": queue,
                    "allocated_gpus": at(sched.allocated),
                    "pending_gpus": at(sched.pending_gpus),
                    "pending_jobs": at(sched.pending_jobs),
                    "deserved_gpus": sched.deserved[np.maximum(qidx, 0), qi],
                    "capability_gpus": sched.capability[np.maximum(qidx, 0), qi],
                    "jobs_started": started,
                    "mean_wait_s": np.where(started > 0, waits / np.maximum(started, 1), np.nan),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def summary_totals(summary: pd.DataFrame, attempts: pd.DataFrame) -> dict[str, float]:
    """Headline numbers of a run (for comparing two quota policies)."""
    waits = attempts["wait_s"].to_numpy()
    return {
        "mean_allocated_gpus": float(summary["allocated_gpus"].mean()),
        "mean_allocation_rate": float(summary["allocation_rate"].mean()),
        "mean_busy_gpus": float(summary["busy_gpus"].mean()),
        "mean_pending_gpus": float(summary["pending_gpus"].mean()),
        "mean_wait_s": float(waits.mean()) if len(waits) else 0.0,
        "p95_wait_s": float(np.percentile(waits, 95)) if len(waits) else 0.0,
        "mean_fragmentation_rate": float(summary["fragmentation_rate"].mean()),
        "jobs_started": float(len(attempts)),
    }
