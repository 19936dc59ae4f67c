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
- **where**: victims are chosen task by task and node by node, and evicted only if the pending gang can then
  run (``evict.py``); a pod marked ``volcano.sh/preemptable: "false"`` (job column ``preemptable``) is
  never a victim.

Neither ``reclaim`` nor ``preempt`` is in Volcano's default ``actions`` (``enqueue, allocate, backfill``),
so both are off in ``VolcanoSettings()`` and a run without them is the plain allocate loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["VolcanoSettings", "kept_work"]


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


def kept_work(work_s: float, checkpoint_s: float, *, finished: bool) -> float:
    """Seconds of an attempt's progress that survive it: all of it when it finished, else up to the last
    checkpoint (none without checkpoints)."""
    if finished:
        return work_s
    if not math.isfinite(checkpoint_s) or checkpoint_s <= 0:
        return 0.0
    return math.floor(work_s / checkpoint_s) * checkpoint_s
