"""The numbers a replay reports, all over the replay window ``[start, end)`` and all from the scheduler.

- ``allocation``: allocated GPU-hours ÷ capacity GPU-hours (time-weighted over every scheduling pass);
- ``utilisation``: used GPU-hours ÷ capacity, where a job uses the GPUs its usage profile keeps busy
  (never more than it holds) while it runs — right-sizing cannot raise it by shrinking idle requests;
- ``wait_p50_min`` / ``wait_p95_min``: first-attempt wait of the jobs submitted in the window; a job never
  started by ``end`` counts with ``end − submit`` (a lower bound, so starvation is not hidden);
- ``preemptions`` / ``reclaims``: evictions by priority inside a queue / by another queue's reclaim;
- ``lost_gpu_h``: GPUs × work since the last checkpoint of attempts evicted in the window, plus GPUs ×
  the restart overhead restarted attempts spend in it;
- ``goodput_gpu_h``: used GPUs × work kept (finished, checkpointed, or still running at ``end``);
- ``fragmentation``: mean FGD-stranded GPUs ÷ capacity over hourly samples (Weng et al., ATC'23: free
  GPUs that a task of the workload's size mix could not use); ``fragmentation_of_free`` divides by the
  free GPUs instead, as the simulator's summary does;
- ``pending_gpu_h``: GPUs asked for and not allocated, integrated over the window (starvation);
- ``quota_utilisation``: allocated GPU-hours ÷ Σ deserved GPU-hours (how much of the quota was used).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from predictor.sim import SchedulerResult, fragmentation
from predictor.sim.series import epoch_s

__all__ = ["FragmentationSampler", "summarise"]


class FragmentationSampler:
    """Hourly FGD samples of a live scheduler's free GPUs per node."""

    def __init__(self, sizes: np.ndarray, gpus_per_node: int) -> None:
        values, counts = np.unique(np.minimum(sizes, 2 * gpus_per_node), return_counts=True)
        self.sizes, self.probs, self.g = values, counts / counts.sum(), gpus_per_node
        self.stranded: list[float] = []
        self.free: list[float] = []

    def sample(self, free_per_node: np.ndarray) -> None:
        frag = fragmentation(free_per_node[:, None], self.sizes, self.probs, self.g)
        self.stranded.append(float(frag[0]))
        self.free.append(float(free_per_node.sum()))


def _clip(start_s: np.ndarray, end_s: np.ndarray, lo: int, hi: int) -> np.ndarray:
    out: np.ndarray = np.clip(np.minimum(end_s, hi) - np.maximum(start_s, lo), 0, None).astype(float)
    return out


def summarise(
    result: SchedulerResult,
    *,
    start: pd.Timestamp,
    end: pd.Timestamp,
    capacity: int,
    used_gpus: np.ndarray,
    submit_s: np.ndarray,
    sampler: FragmentationSampler,
) -> dict[str, float]:
    """The replay summary (keys of ``summary.json``); ``used_gpus`` and ``submit_s`` (epoch seconds) are
    indexed like the scheduler's jobs."""
    lo, hi = int(start.timestamp()), int(end.timestamp())
    t = result.timeline_s
    span = np.diff(np.append(t, hi)).clip(0)
    inside = (t >= lo) & (t < hi)
    before = np.flatnonzero(t < lo)
    alloc_s = float((result.allocated[inside].sum(axis=1) * span[inside]).sum())
    if len(before):  # the state carried into the window from the last pass before it
        alloc_s += float(result.allocated[before[-1]].sum()) * (min(t[inside][0], hi) - lo if inside.any() else hi - lo)
    cap_s = float(capacity) * (hi - lo)
    pending_s = _step_integral(t, result.pending_gpus.sum(axis=1) if len(t) else np.zeros(0), lo, hi)
    deserved_s = _step_integral(result.quota_s, result.deserved.sum(axis=1), lo, hi)
    a = result.attempts
    s, e = epoch_s(a["start"]), epoch_s(a["end"])
    gpus = a["num_gpus"].to_numpy().astype(float)
    used = np.minimum(used_gpus[a["job_index"].to_numpy()], gpus)
    overhead = a["overhead_s"].to_numpy()
    running = a["cause"].to_numpy() == "running"
    kept = np.where(running, np.maximum(np.minimum(e, hi) - s - overhead, 0), a["kept_s"].fillna(0).to_numpy())
    work_from = s + overhead
    goodput_s = float((used * _clip(work_from, work_from + kept, lo, hi)).sum())
    used_s = float((used * _clip(s, np.where(running, np.minimum(e, hi), e), lo, hi)).sum())
    # Work since the last checkpoint of attempts evicted in the window, and the restart overhead paid in it.
    ended = (e >= lo) & (e < hi)
    evicted = a["cause"].isin(["reclaim", "preempt", "node"]).to_numpy() & ended
    lost_s = float((gpus * a["lost_s"].fillna(0).to_numpy())[evicted].sum())
    lost_s += float((gpus * _clip(s, np.minimum(s + overhead, e), lo, hi)).sum())
    waits = _waits(a, submit_s, lo, hi)
    frag = np.array(sampler.stranded) if sampler.stranded else np.zeros(1)
    free = np.array(sampler.free) if sampler.free else np.ones(1)
    return {
        "allocation": alloc_s / cap_s,
        "utilisation": used_s / cap_s,
        "wait_p50_min": float(np.percentile(waits, 50)) / 60 if len(waits) else 0.0,
        "wait_p95_min": float(np.percentile(waits, 95)) / 60 if len(waits) else 0.0,
        "preemptions": int((a["cause"].to_numpy() == "preempt")[(e >= lo) & (e < hi)].sum()),
        "reclaims": int((a["cause"].to_numpy() == "reclaim")[(e >= lo) & (e < hi)].sum()),
        "lost_gpu_h": lost_s / 3600,
        "goodput_gpu_h": goodput_s / 3600,
        "fragmentation": float((frag / capacity).mean()),
        "fragmentation_of_free": float(np.where(free > 0, frag / np.maximum(free, 1), 0.0).mean()),
        "pending_gpu_h": pending_s / 3600,
        "quota_utilisation": alloc_s / deserved_s if deserved_s > 0 else 0.0,
    }


def _step_integral(times: np.ndarray, values: np.ndarray, lo: int, hi: int) -> float:
    """∫ of a step function (``values[i]`` from ``times[i]`` to the next time) over ``[lo, hi)``."""
    if len(times) == 0:
        return 0.0
    edges = np.append(times, hi).astype(float)
    spans = np.clip(np.minimum(edges[1:], hi) - np.maximum(edges[:-1], lo), 0, None)
    return float((values.astype(float) * spans).sum())


def _waits(attempts: pd.DataFrame, submit_s: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """First-attempt waits (s) of jobs submitted in the window; a job never started waits until ``hi``."""
    first = attempts[attempts["attempt"] == 0]
    submit = epoch_s(first["submit"])
    inside = (submit >= lo) & (submit < hi)
    never = np.ones(len(submit_s), dtype=bool)
    never[first["job_index"].to_numpy()] = False
    never &= (submit_s >= lo) & (submit_s < hi)
    return np.concatenate([first["wait_s"].to_numpy()[inside], (hi - submit_s[never]).astype(float)])
