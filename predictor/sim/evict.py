"""Where Volcano's reclaim and preempt actions evict: task by task, node by node, and only for a gang that
can then run.

Volcano's reclaim action (between queues) and preempt action (inside a queue), as volcano-sh/volcano
v1.16.0-alpha.1 implements them (``pkg/scheduler/actions/reclaim/reclaim.go``,
``pkg/scheduler/actions/preempt/preempt.go``), share one shape, which this module copies:

1. A pending gang is a list of tasks (pods); each is tried in turn.
2. A task that fits some node's future idle GPUs is pipelined there without evicting anything (binpack:
   the fullest node that fits, as the scheduler places).
3. Otherwise nodes are taken in turn. On one node, the running tasks the action may evict are popped in
   victim order and evicted **on that node only** until the task fits there; if it cannot fit there, that
   node's evictions are discarded and the next node is tried. The first node that fits wins.
4. After the gang's tasks: if every task found a node (the simulator's gangs run only whole, so the gang
   minimum is every task), the evictions are committed; otherwise nothing is evicted.

A running gang on several nodes is one task per node: evicting its task on one node frees only that node's
GPUs for the task being placed (its other pods are released later, by the job's restart policy, not in
this scheduling session), while the victim job as a whole stops (the simulator's gang rule), so the GPUs that leave its
queue are all of them. The choice of victims is therefore task by task, and one round may break several
gangs, as Volcano's does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Evictions", "Victim", "gang_tasks", "plan_evictions"]


@dataclass(frozen=True)
class Victim:
    """A running gang some of whose tasks could be evicted."""

    attempt: int
    queue: int
    gpus: np.ndarray  # GPU indices it holds (node = index // GPUs per node)
    priority: int  # its job's priorityClass value
    start: int  # epoch seconds


@dataclass(frozen=True)
class Evictions:
    """A committed plan: the gangs that lose a task and where each task of the pending gang goes."""

    victims: list[Victim]  # in the order their first task was evicted
    placement: list[tuple[int, int]]  # (node, GPUs) per task of the pending gang
    taken: dict[int, int] = field(default_factory=dict)  # GPUs leaving each victim queue (whole gangs)


def gang_tasks(g: int, per_node: int) -> list[int]:
    """A gang's tasks, sized as the scheduler places gangs: one task when it fits a node, else one task per
    whole node plus one for the remainder."""
    if g <= per_node:
        return [g]
    k, r = divmod(g, per_node)
    return [per_node] * k + ([r] if r else [])


def _tasks_by_node(candidates: Sequence[Victim], per_node: int) -> dict[int, list[tuple[int, int]]]:
    """Node → (candidate index, GPUs it holds there), in victim order."""
    by_node: dict[int, list[tuple[int, int]]] = {}
    for i, v in enumerate(candidates):
        nodes, counts = np.unique(v.gpus // per_node, return_counts=True)
        for node, count in zip(nodes.tolist(), counts.tolist(), strict=True):
            by_node.setdefault(node, []).append((i, count))
    return by_node


def plan_evictions(
    tasks: Sequence[int],
    free: np.ndarray,
    candidates: Sequence[Victim],
    per_node: int,
    *,
    may_take: Callable[[Victim, int], bool],
) -> Evictions | None:
    """The evictions that let a gang of ``tasks`` (GPUs per task) run, or ``None`` when it cannot: then
    nothing is evicted.

    ``free``: idle GPUs per node (negative: the node is not ready, nothing goes there). ``candidates``: the
    running gangs the action may evict, already in victim order. ``may_take(victim, GPUs already taken from
    its queue)`` is the per-queue rule (reclaim: over deserved, never below guarantee), asked once per gang
    when its first task would be evicted; a refused gang is passed over.
    """
    idle = np.asarray(free, dtype=np.int64).copy()
    by_node = _tasks_by_node(candidates, per_node)
    hit: set[int] = set()  # candidates that lost a task
    gone: set[tuple[int, int]] = set()  # (candidate, node) tasks evicted
    order: list[int] = []
    taken: dict[int, int] = {}
    placement: list[tuple[int, int]] = []
    for need in tasks:
        fit = np.flatnonzero(idle >= need)
        if len(fit):  # fits as it is: no eviction for this task
            node = int(fit[np.argmin(idle[fit])])
            idle[node] -= need
            placement.append((node, need))
            continue
        for node in range(len(idle)):
            if idle[node] < 0:
                continue
            room, trial, trial_taken = int(idle[node]), [], dict(taken)
            for i, count in by_node.get(node, ()):
                if (i, node) in gone:
                    continue
                v = candidates[i]
                if i not in hit:
                    if not may_take(v, trial_taken.get(v.queue, 0)):
                        continue
                    trial_taken[v.queue] = trial_taken.get(v.queue, 0) + len(v.gpus)
                trial.append(i)
                room += count
                if room >= need:
                    break
            if room < need:
                continue  # this node's evictions are discarded; the next node is tried
            for i in trial:
                gone.add((i, node))
                if i not in hit:
                    hit.add(i)
                    order.append(i)
            taken = trial_taken
            idle[node] = room - need
            placement.append((node, need))
            break
        else:
            return None  # a task found no node: the gang cannot run, so nothing is evicted
    return Evictions([candidates[i] for i in order], placement, taken)
