"""Whether a queue is planned this cycle, or the hold that keeps it as it is (and why).

Apart from the plan itself because it is the one list of reasons a queue is left alone: protected, not
managed, a hold of every queue, no forecast, or its cooldown.
"""

from __future__ import annotations

from collections.abc import Mapping

from predictor.planner.decisions import Hold, Memory, Series
from predictor.planner.safety import remember
from predictor.planner.settings import PROTECTED_QUEUES, PlannerSettings
from predictor.planner.state import FIELDS, QueueState
from predictor.planner.targets import Target

__all__ = ["why_not_planned"]


def why_not_planned(
    queue: QueueState,
    mine: Mapping[str, Target] | None,
    settings: PlannerSettings,
    now_s: float,
    last_changed: Mapping[str, float],
    hold_all: tuple[str, str] | None,
    recs: dict[str, Series],
) -> Hold | None:
    """The hold that keeps ``queue`` as it is this cycle, or ``None`` when it is planned.

    A queue in its cooldown still feeds its targets to the stabilisation windows (``recs``), so the
    windows are full when the cooldown ends.
    """
    if queue.name in PROTECTED_QUEUES:
        return Hold(queue.name, f"{queue.name} is never resized", "protected")
    if not queue.managed:
        return Hold(
            queue.name,
            "not managed: not opted in (actuators.queues.manage) or annotated gpu-capacity-predictor/managed=false",
            "opted_out",
        )
    if hold_all is not None:
        return Hold(queue.name, hold_all[1], hold_all[0])
    if not mine:
        return Hold(queue.name, "no forecast for this queue in the planning horizon", "no_forecast")
    since = now_s - last_changed.get(queue.name, float("-inf"))
    if since < settings.cooldown_s:
        for resource, target in mine.items():
            for name in FIELDS:
                key = Memory.key(queue.name, name, resource)
                recs[key] = remember(
                    recs.get(key, ()),
                    now_s,
                    float(getattr(target, name)),
                    2 * max(settings.shrink_window_s, settings.grow_window_s),
                )
        return Hold(queue.name, f"cooldown: last change {since:.0f} s ago (< {settings.cooldown_s:g} s)", "cooldown")
    return None
