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

from models.frames import TIME
from predictor.errors import InputError
from predictor.planner.decisions import Memory, QueuePlan
from predictor.planner.invariants import check_invariants
from predictor.planner.plan import plan_queues
from predictor.planner.settings import PlannerSettings
from predictor.planner.state import QueueState
from predictor.planner.targets import forecast_targets

__all__ = ["CyclePlan", "plan_cycle", "stale_forecast"]

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
        return "stale_data", (f"forecast starts {first.isoformat()}, older than {settings.stale_after_s:g} s "
                              f"at {now.isoformat()}")
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
    last_changed: Mapping[str, float] | None = None,
    hold: HoldAll | None = None,
) -> CyclePlan:
    """Plan one cycle from the live ``queues`` and a ``forecast`` (``None``: nothing to plan from).

    ``hold`` is a reason found before planning (source down, stale history, no model); a stale forecast
    adds one. Either way every queue is held with it and no target is computed. A plan that breaks an
    invariant is replaced by one that holds everything (``invalid_state``): nothing of it may be applied.
    """
    if hold is None and forecast is not None:
        hold = stale_forecast(forecast, settings, now=now)
    targets = forecast_targets(forecast, settings, now=now, demand=demand) if (
        hold is None and forecast is not None) else None
    plan = plan_queues(queues, targets, settings, now=now, allocatable=allocatable, memory=memory,
                       last_changed=last_changed, hold_all=hold)
    problems = check_invariants(queues, dict(plan.desired), allocatable)
    if problems:  # belt and braces: the policy should make this impossible
        hold = ("invalid_state", f"plan breaks an invariant, nothing applied: {problems[0]}")
        plan = plan_queues(queues, None, settings, now=now, memory=memory, hold_all=hold)
    return CyclePlan(plan, hold)
