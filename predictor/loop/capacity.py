"""The capacity reference of the loop's state file: what a drop in allocatable GPUs is measured against.

Kept apart from the cycle: it is the one piece of state that spans cycles besides the stabilisation memory,
and its rule (hold on a drop, accept a drop that lasts) is the planner's ``capacity_drop`` over time.

The reference is a high-water mark, not the last cycle: when each cycle is compared with the one before, a
collapse in steps each under the hold fraction (16 → 9 → 5 → 3 → 2 → 1 Ready nodes, a device-plugin rollout
breaking nodes one by one) never holds, and the guarantees follow the cluster down. The state keeps the
hourly maxima of allocatable over ``planner.capacity_reference_window_s``; their maximum is the reference.
With no reference at all (a first deploy, a lost volume) the share of NotReady GPU nodes decides instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from predictor.planner import PlannerSettings, capacity_drop

__all__ = ["CapacityCheck", "judge"]

_BUCKET_S = 3600.0  # one mark an hour: a week's window is 168 marks in the state file, whatever the interval


@dataclass(frozen=True)
class CapacityCheck:
    """A cycle's view of capacity: what a drop is measured against, a hold found without one, the next state."""

    reference: dict[str, float] | None  # the high-water mark (``None``: no reference, or a drop just accepted)
    hold: tuple[str, str] | None  # a first cycle's hold (no reference, too many GPU nodes NotReady)
    state: dict[str, Any]  # what the state file keeps for the next cycle

    @property
    def next_reference(self) -> dict[str, float]:
        """What the next cycle's drop is measured against (exported on ``/metrics``)."""
        return _high_water(self.state["marks"])


def judge(
    saved: object,
    allocatable: dict[str, float],
    gpu_nodes: tuple[int, int],
    now: pd.Timestamp,
    settings: PlannerSettings,
) -> CapacityCheck:
    """The reference a drop is measured against (``planner.capacity_drop_hold``), and the state to keep.

    ``gpu_nodes`` is ``(NotReady or cordoned, all)`` GPU nodes. A drop (or a first cycle's NotReady share)
    that has held for ``capacity_drop_accept_s`` is taken as the new capacity (a decommissioned rack), unless
    allocatable is zero; the marks then start again from this cycle.
    """
    record = saved if isinstance(saved, dict) else {}
    marks = _marks(record, now, settings)
    since = record.get("drop_since")
    since = float(since) if isinstance(since, int | float) and math.isfinite(since) else None
    accepted = (
        since is not None
        and now.timestamp() - since >= settings.capacity_drop_accept_s
        and all(v > 0 for v in allocatable.values())
    )
    at = now.timestamp()
    if accepted:
        return CapacityCheck(None, None, {"marks": _add([], at, allocatable), "drop_since": None})
    if not marks:
        hold = _fresh_hold(*gpu_nodes, settings)
        if hold is not None:  # nothing recorded while held: the collapsed cluster must not become the reference
            return CapacityCheck(None, hold, {"marks": [], "drop_since": since or at})
        return CapacityCheck(None, None, {"marks": _add([], at, allocatable), "drop_since": None})
    top = _high_water(marks)
    dropped = capacity_drop(top, allocatable, settings) is not None
    state = {"marks": _add(marks, at, allocatable), "drop_since": (since or at) if dropped else None}
    return CapacityCheck(top, None, state)


def _fresh_hold(not_ready: int, total: int, settings: PlannerSettings) -> tuple[str, str] | None:
    if total <= 0 or not_ready / total <= settings.capacity_fresh_not_ready:
        return None
    return "capacity_drop", (
        f"no capacity reference yet and {not_ready} of {total} GPU nodes are NotReady or cordoned "
        f"(more than {settings.capacity_fresh_not_ready:.0%})"
    )


def _marks(saved: dict[str, Any], now: pd.Timestamp, settings: PlannerSettings) -> list[list[Any]]:
    """The saved marks inside the window (a state file of the older one-reference shape reads as one mark)."""
    raw = saved.get("marks")
    if raw is None and isinstance(saved.get("allocatable"), dict):
        raw = [[now.timestamp(), saved["allocatable"]]]
    if not isinstance(raw, list):
        return []
    oldest = now.timestamp() - settings.capacity_reference_window_s
    marks: list[list[Any]] = []
    for mark in raw:
        if not (isinstance(mark, list | tuple) and len(mark) == 2 and isinstance(mark[1], dict)):
            continue
        at, values = mark
        if not isinstance(at, int | float) or not math.isfinite(at) or at < oldest:
            continue
        clean = {str(k): float(v) for k, v in values.items() if isinstance(v, int | float) and math.isfinite(v)}
        marks.append([float(at), clean])
    return marks


def _high_water(marks: list[list[Any]]) -> dict[str, float]:
    top: dict[str, float] = {}
    for _, values in marks:
        for resource, value in values.items():
            top[resource] = max(top.get(resource, value), value)
    return top


def _add(marks: list[list[Any]], at: float, allocatable: dict[str, float]) -> list[list[Any]]:
    """Add ``allocatable`` as a mark, merged (maximum) into the last one when both fall in the same hour."""
    values = {str(k): float(v) for k, v in allocatable.items()}
    if marks and marks[-1][0] // _BUCKET_S == at // _BUCKET_S:
        last = dict(marks[-1][1])
        for resource, value in values.items():
            last[resource] = max(last.get(resource, value), value)
        return [*marks[:-1], [marks[-1][0], last]]
    return [*marks, [at, values]]
