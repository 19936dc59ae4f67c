"""The quota policies a replay compares the loop with that plan from no forecast.

- static quotas (``static_queues``): deserved = each queue's share of the GPU-time submitted in the week
  before, at least 1 GPU; ``static-hard`` and ``static-elastic`` set them once, ``static-weekly``
  (``StaticWeekly``) sets them again from the week just past at every week boundary of the replay, as a team
  that re-estimates its quotas weekly by hand would;
- ``proportion`` (``Proportion``): Volcano's proportion plugin. At every scheduling session each queue's
  deserved is recomputed by water-filling the cluster over the queues' weights, never above what a queue
  requests (GPUs allocated + pending); what a queue asking less than its share leaves is handed round
  again to the others by weight, until nobody asks for more or nothing is left. No forecast, no memory:
  deserved follows requests at once. Capability stays the cluster, so a queue may take idle GPUs beyond
  its deserved and is reclaimed when another's share needs them back (the simulator has no "overused"
  gate that stops a queue at its deserved: gangs here are admitted whole under the capability).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from predictor.sim import QueueSpec, Quota, Scheduler

__all__ = ["Proportion", "StaticWeekly", "static_queues", "water_fill"]

WEEK = pd.Timedelta(days=7)
_EPS = 1e-9


def static_queues(jobs: pd.DataFrame, start: pd.Timestamp, total: int, *, hard: bool) -> list[QueueSpec]:
    """Deserved = each queue's share of GPU-time submitted in the week before ``start``, at least 1 GPU."""
    week = jobs[(jobs["submit"] >= start - WEEK) & (jobs["submit"] < start)]
    gpu_time = (week["num_gpus"] * week["duration_s"]).groupby(week["queue"]).sum()
    share = gpu_time / gpu_time.sum() if gpu_time.sum() > 0 else gpu_time
    specs = []
    for name in sorted(jobs["queue"].astype(str).unique()):
        deserved = max(1.0, math.floor(float(share.get(name, 0.0)) * total))
        specs.append(QueueSpec(name, deserved=deserved, capability=deserved if hard else float(total)))
    return specs


def water_fill(requests: Mapping[str, float], weights: Mapping[str, float], total: float) -> dict[str, float]:
    """Volcano proportion's deserved: ``total`` shared by weight, no queue above its request, the rest
    shared again among the queues still asking (rounds until nothing is left or nobody asks for more)."""
    deserved = dict.fromkeys(requests, 0.0)
    asking = [q for q, r in requests.items() if r > _EPS]
    remaining = float(total)
    while asking and remaining > _EPS:
        weight = sum(float(weights.get(q, 1)) for q in asking)
        handed = 0.0
        for q in list(asking):
            share = deserved[q] + remaining * float(weights.get(q, 1)) / weight
            if share >= requests[q] - _EPS:
                share = float(requests[q])
                asking.remove(q)
            handed += share - deserved[q]
            deserved[q] = share
        remaining -= handed
        if handed <= _EPS:
            break
    return deserved


class Proportion:
    """Recompute every queue's deserved from its weight and requests at each scheduling session."""

    def __init__(self, sched: Scheduler, weights: Mapping[str, float], total: int) -> None:
        self.sched, self.total = sched, total
        self.weights = {q: float(weights.get(q, 1)) for q in sched.queue_names}
        self.deserved = {q: float(sched.deserved[i]) for i, q in enumerate(sched.queue_names)}
        self.changes = 0

    def session(self, t: pd.Timestamp) -> None:
        del t  # the scheduler is already at ``t``: its allocated and pending GPUs are the session's
        allocated, pending = self.sched.allocated, self.sched.pending
        requests = {q: float(allocated[q] + pending[q]) for q in self.sched.queue_names}
        shares = water_fill(requests, self.weights, self.total)
        changed = {q: d for q, d in shares.items() if abs(d - self.deserved[q]) > _EPS}
        if changed:
            self.sched.set_quotas({q: Quota(deserved=d) for q, d in changed.items()})
            self.deserved.update(changed)
            self.changes += len(changed)


class StaticWeekly:
    """Static elastic quotas, re-estimated at every week boundary of the replay from the week before it."""

    def __init__(self, sched: Scheduler, jobs: pd.DataFrame, start: pd.Timestamp, total: int) -> None:
        self.sched, self.jobs, self.start, self.total = sched, jobs, start, total
        self.changes = 0

    def hourly(self, t: pd.Timestamp) -> None:
        if t <= self.start or (t - self.start) % WEEK != pd.Timedelta(0):
            return
        now = dict(zip(self.sched.queue_names, self.sched.deserved.tolist(), strict=True))
        new = {s.name: s.deserved for s in static_queues(self.jobs, t, self.total, hard=False)}
        changed = {q: d for q, d in new.items() if d != now[q]}
        if changed:  # capability stays the cluster (elastic), as static-elastic's
            self.sched.set_quotas({q: Quota(deserved=d) for q, d in changed.items()})
            self.changes += len(changed)
