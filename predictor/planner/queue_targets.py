"""Targets per queue, fitted to the live cluster before the safety policy decides on them.

``plan_queues`` receives targets keyed by (queue, resource), sized by a forecast that knows nothing of the
cluster today. These steps reshape them into what the cluster can hold: each capped at the live allocatable
GPUs, capability set by the borrow mode, and Σ deserved of the leaf queues scaled down to fit. They work on
targets alone, never on live quota values, reasons or memory, so they stand apart from the per-field
decisions in ``predictor.planner.plan``, whose ``plan_queues`` calls them in turn, with the pending-gang rules
(``predictor.planner.pending``) between them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from predictor.planner.settings import PROTECTED_QUEUES, PlannerSettings
from predictor.planner.state import QueueState
from predictor.planner.targets import Target

__all__ = ["borrow", "fit_deserved", "targets_by_queue"]


def targets_by_queue(
    targets: Mapping[tuple[str, str], Target],
    allocatable: Mapping[str, float],
) -> dict[str, dict[str, Target]]:
    """Targets as queue → resource → target, each capped at the live allocatable GPUs of its resource."""
    per_queue: dict[str, dict[str, Target]] = {}
    for (queue_name, resource), target in targets.items():
        per_queue.setdefault(queue_name, {})[resource] = target
    for wanted in per_queue.values():
        for resource, target in list(wanted.items()):
            limit = allocatable.get(resource)
            if limit is not None and limit > 0 and max(target.deserved, target.capability) > limit:
                # A quota larger than the live cluster means nothing, and unbounded backlog would grow it forever.
                wanted[resource] = replace(
                    target,
                    deserved=min(target.deserved, limit),
                    capability=min(target.capability, limit),
                    guarantee=min(target.guarantee, limit),
                    basis=f"{target.basis}, capped at live allocatable {limit:g}",
                )
    return per_queue


def borrow(
    per_queue: dict[str, dict[str, Target]],
    queues: Mapping[str, QueueState],
    allocatable: Mapping[str, float],
    settings: PlannerSettings,
) -> None:
    """How much each queue may borrow: its capability target.

    ``planner.borrow: idle``: capability = the live allocatable GPUs of the resource. Why: a capability at
    the forecast's upper bound makes a burst above the forecast wait behind idle GPUs. Elastic quotas let it
    borrow them, and borrowing is safe to allow because Volcano's ``reclaim`` takes borrowed GPUs back when a
    queue below its deserved share has pending work; the admission limit is then ``allocatable − Σ other
    queues' guarantee``. What is at risk of reclaim is the demand above ``deserved``, which the forecast
    still sizes, so the planner's lever on reclaim loss is deserved (and on waiting for the steady floor,
    guarantee), not the cap. The gang floor and pool ceiling still apply.

    A queue with ``spec.reclaimable: false`` borrows nothing, in either mode: reclaim never takes back what
    it holds above deserved (Volcano takes victims only from reclaimable queues), so anything it borrowed
    would be kept for as long as its gangs run, against the other queues' deserved shares. Its capability
    target is its deserved target (the gang floor may still raise it: a gang above capability is never
    admitted).
    """
    for name, wanted in per_queue.items():
        queue = queues.get(name)
        for resource, target in list(wanted.items()):
            if queue is not None and not queue.reclaimable:
                if target.capability > target.deserved:
                    why = (
                        f"capability target {target.deserved:g} = deserved: the queue is not reclaimable "
                        "(spec.reclaimable: false), so it borrows nothing"
                    )
                    notes = (*(n for n in target.notes if n[0] != "capability"), ("capability", "borrow", why))
                    wanted[resource] = replace(
                        target, capability=target.deserved, notes=notes, codes={**target.codes, "capability": "borrow"}
                    )
                continue
            limit = allocatable.get(resource)
            if settings.borrow != "idle" or limit is None or limit <= 0 or target.capability >= limit:
                continue
            # A shaping note on capability (gang floor) no longer explains it: the cap is above any floor.
            notes = tuple(n for n in target.notes if n[0] != "capability")
            wanted[resource] = replace(
                target, capability=float(limit), notes=notes, codes={**target.codes, "capability": "borrow"}
            )


def fit_deserved(
    per_queue: dict[str, dict[str, Target]],
    queues: Sequence[QueueState],
    allocatable: Mapping[str, float],
    settings: PlannerSettings,
) -> None:
    """Σ deserved targets of leaf queues ≤ live allocatable, by one common factor per resource.

    Parents are left out (the hierarchy step sizes them from their children). The safety policy still
    applies afterwards, so no queue goes below what it has allocated.
    """
    parents = {q.parent for q in queues if q.parent}
    for resource, limit in allocatable.items():
        leaves = [
            (name, wanted[resource])
            for name, wanted in per_queue.items()
            if resource in wanted and name not in parents and name not in PROTECTED_QUEUES
        ]
        total = sum(t.deserved for _, t in leaves)
        if limit <= 0 or total <= limit:
            continue
        factor = limit / total
        step = settings.round_to
        for name, target in leaves:
            deserved = max(math.floor(target.deserved * factor / step) * step, settings.limits(name).min_deserved)
            per_queue[name][resource] = replace(
                target,
                deserved=deserved,
                guarantee=min(target.guarantee, deserved),
                basis=f"{target.basis}, ×{factor:.2f} so Σ deserved ≤ live allocatable {limit:g}",
            )
