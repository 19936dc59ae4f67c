"""GPU fragmentation on a live cluster (the FGD measure) and advice on which nodes to drain to free whole nodes.

FGD (Fragmentation Gradient Descent, Weng et al., USENIX ATC '23) defines a node's fragmentation for a task
as the free GPUs on it that the task cannot use, and the cluster's as the expectation over the *typical task
mix*: ``F = Σ_nodes Σ_m p_m · free_n · [free_n < g_m]``, with ``g_m`` the GPUs per pod of task kind ``m``
and ``p_m`` its share of pods (here: the pods now running or pending). It is the same measure the simulator
reports (``predictor.sim.summary.fragmentation``), so live and replayed numbers compare; the rate is
``F ÷ free GPUs``.

Fragmentation matters when a gang waits for whole nodes that are all partly used. ``defrag_advice`` picks
the partly used nodes with the fewest used GPUs and moves their pods into the gaps of other partly used
nodes (best fit, only onto nodes the job can run on) until the largest waiting gang fits. A moved pod
restarts its whole gang (gang semantics), so the advice reports the GPUs restarted as its cost.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from predictor.planner.workload import JobSummary, NodeSummary, Workload

__all__ = ["DefragAdvice", "Fragmentation", "Move", "defrag_advice", "fgd", "task_mix"]


@dataclass(frozen=True)
class Fragmentation:
    """FGD in GPUs, the free GPUs it is measured against, and whole free nodes."""

    gpus: float
    free: int
    free_nodes: int

    @property
    def rate(self) -> float:
        return self.gpus / self.free if self.free else 0.0


@dataclass(frozen=True)
class Move:
    job: str
    gpus: int
    source: str
    target: str


@dataclass(frozen=True)
class DefragAdvice:
    """Nodes to drain, the pod moves that empty them, and what it costs and gains."""

    drain: tuple[str, ...]
    moves: tuple[Move, ...]
    restarted_jobs: tuple[str, ...]
    restarted_gpus: int
    before: Fragmentation
    after: Fragmentation
    reason: str


def task_mix(workload: Workload) -> dict[int, float]:
    """GPUs per pod → share of pods, over running and pending pods (the typical task mix)."""
    counts: Counter[int] = Counter()
    for job in workload.jobs:
        counts[job.gpus_per_pod] += job.pods
    total = sum(counts.values())
    return {g: n / total for g, n in sorted(counts.items())} if total else {}


def fgd(nodes: tuple[NodeSummary, ...] | list[NodeSummary], mix: dict[int, float]) -> Fragmentation:
    """Expected free GPUs no task of ``mix`` can use, over schedulable nodes (``gpus > 0``)."""
    live = [n for n in nodes if n.gpus > 0]
    stranded = sum(p * n.free for n in live for g, p in mix.items() if n.free < g)
    return Fragmentation(float(stranded), sum(n.free for n in live), sum(n.free == n.gpus for n in live))


def _blocked_nodes(workload: Workload) -> tuple[int, str]:
    """Whole free nodes the largest waiting whole-node gang still lacks, and which gang that is."""
    node = workload.gpus_per_node
    free_nodes = sum(n.gpus > 0 and n.free == n.gpus for n in workload.nodes)
    waiting = [j for j in workload.jobs if j.phase == "pending" and j.gpus_per_pod == node]
    if not waiting:
        return 0, ""
    largest = max(waiting, key=lambda j: (j.gpus, j.name))
    return max(math.ceil(largest.gpus / node) - free_nodes, 0), largest.name


def defrag_advice(workload: Workload, *, nodes_wanted: int | None = None) -> DefragAdvice:
    """Which partly used nodes to drain (and where their pods go) to free ``nodes_wanted`` whole nodes.

    Default: as many as the largest pending whole-node gang still lacks. Greedy and deterministic: the
    least used node first, each pod to the fullest other partly used node that fits it and that it may run
    on; a node whose pods do not all fit is skipped. Never moves pods onto an empty node.
    """
    mix = task_mix(workload)
    before = fgd(workload.nodes, mix)
    wanted, gang = _blocked_nodes(workload) if nodes_wanted is None else (nodes_wanted, "")
    free = {n.name: n.free for n in workload.nodes}
    by_name = {n.name: n for n in workload.nodes}
    jobs = {j.name: j for j in workload.jobs}
    pods_on: dict[str, list[JobSummary]] = {n.name: [] for n in workload.nodes}
    for job in workload.jobs:
        for name in job.nodes:
            pods_on.setdefault(name, []).append(job)
    candidates = sorted((n for n in workload.nodes if 0 < n.free < n.gpus), key=lambda n: (n.gpus - n.free, n.name))
    drained: list[str] = []
    moves: list[Move] = []
    for node in candidates:
        if len(drained) >= wanted:
            break
        if not 0 < free[node.name] < node.gpus:  # filled by earlier moves: no longer partly used
            continue
        trial = dict(free)
        planned: list[Move] = []
        for job in sorted(pods_on.get(node.name, []), key=lambda j: (-j.gpus_per_pod, j.name)):
            if job.gpus_per_pod >= workload.gpus_per_node:
                break
            fits = [
                by_name[t]
                for t, f in trial.items()
                if t != node.name
                and t not in drained
                and job.gpus_per_pod <= f < by_name[t].gpus
                and job.can_run_on(by_name[t])
            ]
            if not fits:
                break
            target = min(fits, key=lambda n: (trial[n.name], n.name))
            trial[target.name] -= job.gpus_per_pod
            trial[node.name] += job.gpus_per_pod
            planned.append(Move(job.name, job.gpus_per_pod, node.name, target.name))
        else:
            free = trial
            drained.append(node.name)
            moves.extend(planned)
            for move in planned:  # the moved pods now live on their targets (a later drain sees them there)
                pods_on[move.target].append(jobs[move.job])
            pods_on[node.name] = []
    after_nodes = [NodeSummary(n.name, n.gpus, n.gpus - free[n.name], n.labels, n.taints) for n in workload.nodes]
    restarted = sorted({m.job for m in moves})
    reason = (
        f"{len(drained)} of {wanted} whole nodes freed" + (f" for pending gang {gang}" if gang else "")
        if wanted
        else "no pending whole-node gang waits on fragmentation"
    )
    return DefragAdvice(
        tuple(drained),
        tuple(moves),
        tuple(restarted),
        sum(jobs[j].gpus for j in restarted),
        before,
        fgd(after_nodes, mix),
        reason,
    )
