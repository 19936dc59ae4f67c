"""One planning cycle, the same for the scheduling loop and the offline ``predictor plan`` command.

Both go through ``plan_cycle``: hold everything on stale data, turn the forecast into targets, run the
safety policy, then re-check the invariants independently and hold everything if the plan breaks one. A
plan reviewed offline is therefore the plan the loop makes from the same queues, forecast and clock
(``tests/loop/test_plan_matches_loop.py`` pins that). Pure like the rest of the planner: ``now`` comes in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import pandas as pd

from models.frames import ID, TIME
from predictor.errors import InputError
from predictor.planner.decisions import Memory, QueuePlan
from predictor.planner.gangs import shape_targets
from predictor.planner.invariants import check_invariants
from predictor.planner.plan import plan_queues
from predictor.planner.safety import reclaim_intended
from predictor.planner.settings import PlannerSettings
from predictor.planner.state import QueueState
from predictor.planner.targets import forecast_targets
from predictor.planner.workload import Workload

__all__ = ["CyclePlan", "capacity_drop", "plan_cycle", "stale_forecast", "stale_series"]

HoldAll = tuple[str, str]  # (reason code, reason in words): why every queue is held


class CyclePlan(NamedTuple):
    """The plan of one cycle, and why everything was held (``None`` when it was not)."""

    plan: QueuePlan
    hold: HoldAll | None


def stale_forecast(forecast: pd.DataFrame, settings: PlannerSettings, *, now: pd.Timestamp) -> HoldAll | None:
    """Why ``forecast`` is too old to plan from at ``now`` (``None`` if it is not).

    Too old: it ends before ``now``, or it starts more than ``settings.stale_after_s`` before ``now``.
    """
    if TIME not in forecast.columns:
        raise InputError(f"forecast frame is missing column {TIME!r}")
    times = pd.to_datetime(forecast[TIME], utc=True)
    first, last = times.min(), times.max()
    if last < now:
        return "stale_data", f"forecast ends {last.isoformat()}, before {now.isoformat()}"
    if (now - first).total_seconds() > settings.stale_after_s:
        return "stale_data", (
            f"forecast starts {first.isoformat()}, older than {settings.stale_after_s:g} s at {now.isoformat()}"
        )
    return None


def stale_series(history: pd.DataFrame, settings: PlannerSettings, *, now: pd.Timestamp) -> dict[str, str]:
    """Queue → why its history is stale at ``now``: its own newest sample is older than ``stale_after_s``.

    Per queue, not over the whole frame: one queue whose samples stopped must not ride on the fresh
    samples of the others (it is held as ``stale_data``; the others are planned).
    """
    if history.empty:
        return {}
    newest = pd.to_datetime(history[TIME], utc=True).groupby(history[ID].astype(str)).max()
    out: dict[str, str] = {}
    for queue, last in newest.items():
        age = (now - last).total_seconds()
        if age > settings.stale_after_s:
            out[str(queue)] = f"newest sample of this queue is {age / 3600:.1f} h old (> {settings.stale_after_s:g} s)"
    return out


def capacity_drop(
    previous: Mapping[str, float] | None, current: Mapping[str, float], settings: PlannerSettings
) -> HoldAll | None:
    """Why every queue holds because live allocatable collapsed (``None`` if it did not).

    The rule (``planner.capacity_drop_hold``): a resource with zero allocatable (an empty node list, every
    node NotReady), or one that fell by more than that fraction against ``previous`` (the reference the
    loop recorded), holds everything. Scaling Σ guarantee down to a collapsed node list would strip every
    queue's guarantee on what is most often a reporting failure, not a lost cluster.
    """
    for resource, now_value in sorted(current.items()):
        before = (previous or {}).get(resource)
        if now_value <= 0:
            return "capacity_drop", f"live allocatable {resource} is 0 (no Ready, schedulable node reports it)"
        if before is not None and before > 0 and now_value < (1 - settings.capacity_drop_hold) * before:
            return "capacity_drop", (
                f"live allocatable {resource} fell from {before:g} to {now_value:g} "
                f"(more than {settings.capacity_drop_hold:.0%})"
            )
    return None


def plan_cycle(
    queues: Sequence[QueueState],
    forecast: pd.DataFrame | None,
    settings: PlannerSettings,
    *,
    now: pd.Timestamp,
    allocatable: Mapping[str, float] | None = None,
    demand: pd.DataFrame | None = None,
    memory: Memory | None = None,
    demand_unknown: Mapping[str, str] | None = None,
    last_changed: Mapping[str, float] | None = None,
    hold: HoldAll | None = None,
    held_queues: Mapping[str, HoldAll] | None = None,
    previous_allocatable: Mapping[str, float] | None = None,
    workload: Workload | None = None,
) -> CyclePlan:
    """Plan one cycle from the live ``queues`` and a ``forecast`` (``None``: nothing to plan from).

    ``hold`` is a reason found before planning (source down, stale history, no model); a stale forecast
    adds one, and so does a collapse of ``allocatable`` (``capacity_drop``, against ``previous_allocatable``).
    Either way every queue is held with it and no target is computed. ``held_queues`` holds single queues
    (queue → (code, reason), e.g. one queue's stale history) while the others are planned. A plan that breaks an
    invariant is replaced by one that holds everything (``invalid_state``): nothing of it may be applied.
    ``workload`` (jobs and GPU nodes; ``None``: unknown) shapes the targets by gangs, whole nodes, pools and
    steady high-priority demand (``predictor.planner.gangs``).
    ``demand`` (peaks per queue) and ``demand_unknown`` (queue → why no peak) combine with the forecast by
    ``predictor.planner.demand_rule``.
    """
    if hold is None and forecast is not None:
        hold = stale_forecast(forecast, settings, now=now)
    if hold is None and allocatable is not None:
        hold = capacity_drop(previous_allocatable, allocatable, settings)
    targets = (
        shape_targets(
            forecast_targets(forecast, settings, now=now, demand=demand, demand_unknown=demand_unknown),
            workload,
            settings,
        )
        if (hold is None and forecast is not None)
        else None
    )
    plan = plan_queues(
        queues,
        targets,
        settings,
        now=now,
        allocatable=allocatable,
        memory=memory,
        last_changed=last_changed,
        hold_all=hold,
        held_queues=held_queues,
    )
    shrinkable = {q.name for q in queues if reclaim_intended(reclaimable=q.reclaimable, settings=settings)}
    problems = check_invariants(queues, dict(plan.desired), allocatable, reclaim_above_deserved=shrinkable)
    if problems:  # belt and braces: the policy should make this impossible
        hold = ("invalid_state", f"plan breaks an invariant, nothing applied: {problems[0]}")
        plan = plan_queues(queues, None, settings, now=now, memory=memory, hold_all=hold)
    return CyclePlan(plan, hold)
