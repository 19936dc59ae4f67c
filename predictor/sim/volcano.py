"""Volcano's eviction rules for the simulator: reclaim between queues, preemption inside a queue, and what
an eviction costs a job (work since its last checkpoint, plus the restart overhead of the next attempt).

Kept apart from the scheduler's placement loop so each rule can be read against the plugin it copies
(``reclaim`` action + capacity plugin, ``preempt`` action + priority plugin, as Volcano's scheduler
implements them):

- **reclaim** (capacity plugin ``Preemptive`` / ``Reclaimable``): a pending gang of a queue that would stay
  within its ``deserved`` (and its real capability) may evict running gangs of *other*, ``reclaimable``
  queues that are above their ``deserved``; a victim queue is never taken below its ``guarantee``, and it
  stops giving once it is back at or under ``deserved``. Lower queue priority gives first.
- **preempt** (priority plugin): inside one queue, a pending gang evicts running gangs of strictly lower
  priorityClass; the queue's capability still holds.
- **gang**: a job is one gang, so evicting one of its pods stops the job (all its GPUs are freed).
- Victims are taken only if evicting them lets the pending gang start: Volcano's statement is discarded
  (nothing is evicted) when the reclaimer still does not fit.

Neither ``reclaim`` nor ``preempt`` is in Volcano's default ``actions`` (``enqueue, allocate, backfill``),
so both are off in ``VolcanoSettings()`` and a run without them is the plain allocate loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Victim", "VolcanoSettings", "choose_victims", "fits", "kept_work"]


@dataclass(frozen=True)
class VolcanoSettings:
    """Which eviction actions run, and the checkpoint/restart defaults for jobs that do not state theirs.

    ``checkpoint_s``: seconds between checkpoints (``inf``: none, an evicted job restarts from zero).
    ``restart_s``: seconds a restarted attempt spends before it makes progress again (image pull, reload).
    """

    reclaim: bool = False
    preempt: bool = False
    checkpoint_s: float = math.inf
    restart_s: float = 0.0


@dataclass(frozen=True)
class Victim:
    """A running gang that could be evicted."""

    attempt: int
    queue: int
    gpus: np.ndarray  # GPU indices it holds
    priority: int  # its job's priorityClass value
    start: int  # epoch seconds


def fits(free: np.ndarray, g: int, per_node: int) -> bool:
    """Whether a gang of ``g`` GPUs can be placed on nodes with ``free`` GPUs (the scheduler's placement rule:
    a small gang on one node, a large one on whole nodes plus one node for the remainder)."""
    if g <= per_node:
        return bool((free >= g).any())
    k, r = divmod(g, per_node)
    full = free == per_node
    if int(full.sum()) < k:
        return False
    if not r:
        return True
    rest = free.copy()
    rest[np.flatnonzero(full)[:k]] = -1
    return bool((rest >= r).any())


def choose_victims(
    candidates: Sequence[Victim],
    free: np.ndarray,
    g: int,
    per_node: int,
    *,
    may_take: Callable[[Victim, int], bool],
    enough: Callable[[dict[int, int]], bool] = lambda taken: True,
) -> list[Victim]:
    """The shortest prefix of ``candidates`` (already in eviction order) after whose eviction ``g`` GPUs fit.

    ``may_take(victim, already_taken_from_its_queue)`` is the per-queue rule (over deserved, never below
    guarantee); a refused candidate is skipped. ``enough(GPUs taken per queue)`` is any further condition
    (a preemptor's own quota). Empty when no prefix makes room: nothing is evicted then.
    """
    free = free.copy()
    taken: dict[int, int] = {}
    chosen: list[Victim] = []
    for v in candidates:
        if not may_take(v, taken.get(v.queue, 0)):
            continue
        chosen.append(v)
        taken[v.queue] = taken.get(v.queue, 0) + len(v.gpus)
        np.add.at(free, v.gpus // per_node, 1)
        if fits(free, g, per_node) and enough(taken):
            return chosen
    return []


def kept_work(work_s: float, checkpoint_s: float, *, finished: bool) -> float:
    """Seconds of an attempt's progress that survive it: all of it when it finished, else up to the last
    checkpoint (none without checkpoints)."""
    if finished:
        return work_s
    if not math.isfinite(checkpoint_s) or checkpoint_s <= 0:
        return 0.0
    return math.floor(work_s / checkpoint_s) * checkpoint_s
