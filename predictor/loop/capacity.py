"""The capacity reference of the loop's state file: what a drop in allocatable GPUs is measured against.

Kept apart from the cycle: it is the one piece of state that spans cycles besides the stabilisation memory,
and its rule (hold on a drop, accept a drop that lasts) is the planner's ``capacity_drop`` over time.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from predictor.planner import PlannerSettings, capacity_drop

__all__ = ["next_reference", "reference"]


def reference(
    saved: object, allocatable: dict[str, float], now: pd.Timestamp, settings: PlannerSettings
) -> dict[str, Any]:
    """The capacity reference a drop is measured against (``planner.capacity_drop_hold``).

    It is the allocatable of the last cycle not held for a drop. A drop that has held for
    ``capacity_drop_accept_s`` is taken as the new capacity (a decommissioned rack), unless it is zero.
    """
    if not isinstance(saved, dict) or not isinstance(saved.get("allocatable"), dict):
        return {}
    since = saved.get("drop_since")
    if (
        isinstance(since, int | float)
        and now.timestamp() - since >= settings.capacity_drop_accept_s
        and all(v > 0 for v in allocatable.values())
    ):
        return {}
    return {
        "allocatable": {str(k): float(v) for k, v in saved["allocatable"].items()},
        "drop_since": since if isinstance(since, int | float) else None,
    }


def next_reference(
    reference: dict[str, Any], allocatable: dict[str, float], now: pd.Timestamp, settings: PlannerSettings
) -> dict[str, Any]:
    """Keep the reference (and when the drop began) while allocatable is down; else this cycle's allocatable.

    Judged apart from the cycle's hold: a cycle held for another reason must not record a collapse either.
    """
    if capacity_drop(reference.get("allocatable"), allocatable, settings) is not None:
        since = reference.get("drop_since") or now.timestamp()
        return {"allocatable": reference.get("allocatable") or {}, "drop_since": since}
    return {"allocatable": dict(allocatable), "drop_since": None}
