"""The report's fragmentation section on a live cluster: FGD from kube-state-metrics, and what to drain.

The simulator's directory carries its own per-step fragmentation; a report read from Prometheus had none
("fragmentation needs node-level allocation"). kube-state-metrics has the node level: GPU requests of
running pods with their node, node allocatable, taints and labels. The same workload the loop plans with
(``predictor.sources.queries.WORKLOAD`` → ``predictor.planner.workload_ksm``) gives the FGD rate for the
summary card and ``defrag_advice`` the lines of the section.
"""

from __future__ import annotations

import pandas as pd

from predictor.planner.fragmentation import DefragAdvice, defrag_advice, fgd, task_mix
from predictor.planner.workload import Workload
from predictor.planner.workload_ksm import workload_from_ksm
from predictor.sources import MetricSource
from predictor.sources.queries import workload_frames

__all__ = ["advice_lines", "live_fragmentation"]


def advice_lines(workload: Workload) -> tuple[float, tuple[str, ...]]:
    """The FGD rate of ``workload`` and the section's lines (measure, then the advice and its cost)."""
    frag = fgd(workload.nodes, task_mix(workload))
    advice: DefragAdvice = defrag_advice(workload)
    lines = [
        f"FGD: {frag.gpus:.1f} of {frag.free} free GPUs ({frag.rate:.1%}) cannot be used by the typical task "
        f"mix; {frag.free_nodes} whole free {workload.gpus_per_node}-GPU nodes"
    ]
    if advice.drain:
        lines.append(
            f"drain {', '.join(advice.drain)} ({advice.reason}): FGD {advice.before.gpus:.1f} → "
            f"{advice.after.gpus:.1f} GPUs, whole free nodes {advice.before.free_nodes} → "
            f"{advice.after.free_nodes}; restarts {len(advice.restarted_jobs)} job(s), "
            f"{advice.restarted_gpus} GPUs"
        )
        lines += [f"move {m.job} ({m.gpus} GPUs) {m.source} → {m.target}" for m in advice.moves]
    else:
        lines.append(f"no drain advised: {advice.reason}")
    return frag.rate, tuple(lines)


def live_fragmentation(source: MetricSource, end: pd.Timestamp) -> tuple[float, tuple[str, ...]] | None:
    """FGD rate and section lines at ``end``; ``None`` without kube-state-metrics pod GPU requests."""
    workload = workload_from_ksm(workload_frames(source, end))
    return None if workload is None else advice_lines(workload)
