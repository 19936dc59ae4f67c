"""Cluster size for a replay ("demand close to capacity"), one rule for every trace and window.

- ``drain`` (the default): the smallest cluster on which a work-conserving, quota-free scheduler with fluid
  GPUs ends the replay with no backlog (under one GPU-hour). Smaller, and some submitted work must stay undone
  however it is scheduled; so demand is as close to capacity as it can be while the work still fits.
  Parameter-free, and never below the ``mean`` rule's size.
- ``mean`` (the earlier rule): mean zero-wait demand over the replay at ``load`` of capacity. On a trace whose
  demand grows it over-subscribes the end: the fluid backlog grows to the last hour, part of the jobs never
  start, and p95 wait measures which cohort starves rather than a policy at "demand close to capacity".

The fluid scheduler also bounds "where demand allows": no scheduler allocates more of the jobs' own GPU-time.
"""

from __future__ import annotations

import math

import pandas as pd

from predictor.replay.demand import zero_wait_demand

__all__ = ["fluid", "fluid_bound", "hourly_demand", "sized_nodes"]


def hourly_demand(jobs: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> pd.Series:
    """Cluster zero-wait demand per hour from the warm-up week to ``end``, of the jobs a replay schedules."""
    warm = start - pd.Timedelta(days=7)
    window = jobs[(jobs["submit"] >= warm) & (jobs["submit"] < end)]
    return zero_wait_demand(window, warm, end).groupby("timestamp")["value"].sum()


def fluid(demand: pd.Series, capacity: int) -> tuple[pd.Series, pd.Series]:
    """A work-conserving, quota-free scheduler with fluid GPUs (no gangs, no nodes), hour by hour: it serves
    ``min(capacity, zero-wait demand + backlog)`` and carries the rest as backlog (GPU-hours). Returns the
    served GPUs and the backlog after each hour. The backlog at any hour only falls as capacity grows."""
    backlog, served, left = 0.0, [], []
    for value in demand.to_numpy(float).tolist():
        serve = min(float(capacity), value + backlog)
        backlog = max(0.0, backlog + value - serve)
        served.append(serve)
        left.append(backlog)
    return pd.Series(served, index=demand.index), pd.Series(left, index=demand.index)


def sized_nodes(
    jobs: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp, load: float, per_node: int, sizing: str = "drain"
) -> int:
    """Nodes for the replay under a sizing rule.

    ``mean`` (the earlier rule): the mean zero-wait demand over ``[start, end)`` is ``load`` of capacity. On a
    trace whose demand grows (Alibaba DLRM) that leaves the last weeks over-subscribed and the backlog growing
    to the end, so p95 wait measures which cohort never starts. ``drain`` (the default): the smallest cluster
    on which the work-conserving fluid scheduler (``fluid``) ends the replay with less than one GPU-hour of
    backlog: the work submitted fits, and any smaller cluster must leave work undone however it schedules.
    Parameter-free (``load`` does not apply); never below the ``mean`` rule's size."""
    demand = zero_wait_demand(jobs, start, end).groupby("timestamp")["value"].sum()
    mean_rule = max(1, round(float(demand.mean()) / (load * per_node)))
    if sizing == "mean":
        return mean_rule
    if sizing != "drain":
        raise ValueError(f"sizing: {sizing!r} is not one of mean, drain")
    full = hourly_demand(jobs, start, end)
    low, high = mean_rule, max(mean_rule, math.ceil(float(full.max()) / per_node))
    while low < high:  # the backlog is monotone in capacity: bisect on nodes
        mid = (low + high) // 2
        if float(fluid(full, mid * per_node)[1].iloc[-1]) < 1.0:
            high = mid
        else:
            low = mid + 1
    return low


def fluid_bound(jobs: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp, capacity: int) -> float:
    """The allocation a work-conserving, quota-free scheduler reaches if GPUs were fluid (no gangs, no nodes).

    Hour by hour from the warm-up week (``fluid``), so a burst above capacity fills later idle hours (the
    hourly ``min(demand, capacity)`` does not, and understates what a queueing scheduler can allocate). No
    scheduler allocates more of the jobs' own GPU-time: an upper bound on "where demand allows" (a replay's
    allocation can exceed it only by work evicted jobs run again and their restart overhead)."""
    served = fluid(hourly_demand(jobs, start, end), capacity)[0]
    served = served[served.index >= start]
    return float(served.mean()) / capacity if len(served) else 0.0
