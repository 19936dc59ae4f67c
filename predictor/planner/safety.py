"""The safety policy: what of a raw target may be written to a live queue, and why not the rest.

Rules (the guards of quota autoscalers such as the HPA, plus Volcano's own reclaim rule), applied per
field in this order: stabilisation window (growth takes the lowest recent recommendation, shrinking the
highest, over a longer window), dead band, max step, never lowering ``deserved``/``capability`` below
``status.allocated`` (that is what lets ``reclaim`` evict running gangs), then ``guarantee ≤ deserved ≤
capability`` per resource. The cross-queue rules (Σ children ≤ parent, Σ guarantee ≤ live allocatable)
run over the whole desired state afterwards. Pure functions: no clock, no I/O — the caller passes
``now`` and the memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

from predictor.planner.decisions import Series
from predictor.planner.settings import PlannerSettings

__all__ = ["Decided", "allocated_floor", "beyond_dead_band", "decide_field", "reclaim_intended", "remember"]


@dataclass(frozen=True)
class Decided:
    """The value one field gets this cycle; ``code``/``note`` explain a clip or hold (empty if none)."""

    value: float | None
    code: str = ""
    note: str = ""
    limited: float | None = None  # a pending raise's value under every limit (what it falls back to)


def allocated_floor(field_name: str, allocated: float, *, reclaimable: bool, settings: PlannerSettings) -> float:
    """The lowest value the planner may write to ``field_name`` of a queue holding ``allocated`` GPUs.

    Lowering deserved or capability below allocated is what lets Volcano's ``reclaim`` evict running gangs
    (shrinking a quota evicts nothing by itself; reclaim later takes from queues above their deserved), so
    both keep that floor by default. ``planner.deserved_below_allocated`` (with ``borrow: idle``, on a
    reclaimable queue) lifts it for deserved: a deserved held at allocated turns every
    borrowed GPU into an owned one once the forecast has grown the queue's deserved to what it holds, so when
    Σ deserved exceeds the cluster no queue is above its deserved and reclaim finds no victim (the Alibaba
    replay made 0 reclaims that way). Capability keeps the floor always (it is the admission cap, not a
    share); guarantee has none.
    """
    if field_name == "guarantee":
        return 0.0
    if field_name == "deserved" and reclaim_intended(reclaimable=reclaimable, settings=settings):
        return 0.0
    return allocated


def reclaim_intended(*, reclaimable: bool, settings: PlannerSettings) -> bool:
    """Whether deserved may be planned below what a queue holds, so the rest is reclaimable:
    ``planner.deserved_below_allocated`` with ``borrow: idle`` on a reclaimable queue (``allocated_floor``)."""
    return reclaimable and settings.borrow == "idle" and settings.deserved_below_allocated


def beyond_dead_band(current: float, wanted: float, settings: PlannerSettings) -> bool:
    """``wanted`` is further above ``current`` than the dead band (a pending raise's test: a queue a few
    GPUs short is not starving, and its raise would only take reclaimable room from the others)."""
    return wanted - current > max(settings.dead_band_abs, settings.dead_band_rel * current)


def remember(series: Series, now_s: float, value: float, keep_s: float) -> Series:
    """``series`` plus ``(now, value)``, without points older than ``keep_s`` (or from the future).

    Callers keep twice the longest window: the newest point before the window proves it is covered.
    """
    kept = tuple(p for p in series if now_s - keep_s <= p[0] < now_s)
    return (*kept, (now_s, value))


def _window(series: Series, now_s: float, window_s: float) -> list[float]:
    return [v for t, v in series if now_s - window_s <= t <= now_s]


def _shrink_to(series: Series, now_s: float, window_s: float) -> float | None:
    """The highest recommendation since the shrink window opened, or None if memory does not cover it yet.

    Coverage matters: a freshly started loop has one recommendation, and shrinking on it alone would make
    a restart the fastest way to shrink a queue.
    """
    if window_s <= 0:
        return series[-1][1] if series else None
    older = [p for p in series if p[0] < now_s - window_s]
    if not older:
        return None
    return max([max(older)[1], *_window(series, now_s, window_s)])


def decide_field(
    field_name: str,
    current: float | None,
    target: float,
    allocated: float,
    series: Series,
    now_s: float,
    settings: PlannerSettings,
    *,
    raise_to: float | None = None,
    raise_only: bool = False,
) -> Decided:
    """The value ``field_name`` may take this cycle given its raw ``target`` (already in ``series``).

    ``raise_to`` (``planner.pending_raise``: the GPUs a queue holds plus those its pending gangs ask for) lets
    a raise up to ``min(target, raise_to)`` skip the stabilisation window and max step: raising a waiting
    queue's share evicts nothing by itself, it only lets Volcano's reclaim act for that queue, so waiting an
    hour per step costs wait and buys no safety. It applies only where that shortfall is wider than the dead
    band (a queue a few GPUs short is not starving, and its raise would only take reclaimable room from the
    others). Anything beyond that evidence, and every cut, keeps the limits. With ``raise_only`` (the queue is
    in its cooldown, where only such raises apply) the raise goes to the evidence even where the ordinary
    limits would allow as much or more: a raise the step limit permits is still a pending raise, not a
    reason to hold the queue, and in the cooldown nothing beyond the evidence moves.
    """
    limited = _decide_limited(field_name, current, target, allocated, series, now_s, settings)
    if raise_to is None or current is None:
        return limited
    wanted = min(target, raise_to)
    if beyond_dead_band(current, wanted, settings) and (
        raise_only or limited.value is None or wanted > limited.value + 1e-9
    ):
        return Decided(
            wanted,
            "pending_raise",
            f"raised {current:g} → {wanted:g} at once (no step limit or grow window): "
            f"allocated + pending GPUs {raise_to:g}, target {target:g}",
            limited=current if limited.value is None else limited.value,
        )
    return limited


def _decide_limited(
    field_name: str,
    current: float | None,
    target: float,
    allocated: float,
    series: Series,
    now_s: float,
    settings: PlannerSettings,
) -> Decided:
    """``decide_field`` under every limit: window, dead band, max step, allocated floor."""
    if current is None:
        # Unset means unbounded (capability) or not managed yet: the first value may be set outright,
        # but never below what the queue already holds.
        floor = allocated if field_name != "guarantee" else 0.0
        if target < floor:
            return Decided(floor, "below_allocated", f"raised to allocated {allocated:g}")
        return Decided(target)
    want = target
    if target < current:
        # HPA scale-down semantics: the highest recommendation in the (longer) shrink window wins.
        highest = _shrink_to(series, now_s, settings.shrink_window_s)
        if highest is None:
            return Decided(
                current,
                "stabilising",
                f"shrink to {target:g} waits: fewer than {settings.shrink_window_s / 3600:g} h of recommendations",
            )
        want = highest
        if want >= current:
            return Decided(
                current,
                "stabilising",
                f"shrink to {target:g} waits: higher recommendation within {settings.shrink_window_s / 3600:g} h",
            )
    elif target > current:
        want = min(_window(series, now_s, settings.grow_window_s) or [target])
        if want <= current:
            return Decided(
                current,
                "stabilising",
                f"growth to {target:g} waits: lower recommendation within {settings.grow_window_s / 3600:g} h",
            )
    band = max(settings.dead_band_abs, settings.dead_band_rel * current)
    if abs(want - current) <= band or math.isclose(want, current):
        if math.isclose(want, current):
            return Decided(current)
        return Decided(current, "dead_band", f"{current:g} → {want:g} is inside the dead band ±{band:g}")
    # Whole rounding units, so a clipped step from a whole number of GPUs stays whole.
    unit = settings.round_to
    step = max(unit, math.floor(max(settings.max_step_abs, settings.max_step_rel * current) / unit) * unit)
    code, note = "", ""
    if abs(want - current) > step:
        want = current + math.copysign(step, want - current)
        code, note = "max_step", f"clipped to max step {step:g} (target {target:g})"
    if field_name != "guarantee" and want < current and want < allocated:
        want = min(current, allocated)
        code, note = "below_allocated", f"not below allocated {allocated:g} (target {target:g})"
    return Decided(want, code, note)


def scale_guarantees(
    guarantees: MutableMapping[str, float],
    fixed: float,
    limit: float,
    step: int,
) -> bool:
    """Lower ``guarantees`` (queue → GPUs) proportionally so ``fixed + Σ ≤ limit``; True if any changed."""
    total = sum(guarantees.values())
    if fixed + total <= limit + 1e-9 or total <= 0:
        return False
    room = max(limit - fixed, 0.0)
    factor = room / total
    for queue, value in guarantees.items():
        guarantees[queue] = float(math.floor(value * factor / step + 1e-9) * step)
    return True


def children_of(parents: Mapping[str, str | None]) -> dict[str, list[str]]:
    """Parent name → child names, for the queues that declare a parent."""
    out: dict[str, list[str]] = {}
    for child, parent in parents.items():
        if parent is not None:
            out.setdefault(parent, []).append(child)
    return out


def depth(queue: str, parents: Mapping[str, str | None]) -> int:
    """Distance to the top of the hierarchy (cycles, which the webhook forbids, are cut off)."""
    seen = {queue}
    d = 0
    node = parents.get(queue)
    while node is not None and node not in seen:
        seen.add(node)
        d += 1
        node = parents.get(node)
    return d
