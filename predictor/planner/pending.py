"""Raises backed by pending gangs (``planner.pending_raise``): the deserved a waiting queue's jobs need now.

Why: the max step (8 GPUs or 50 % per cycle) and the hourly cooldown exist because a cut evicts running
gangs. A raise evicts nothing by itself; it lets Volcano's reclaim act for the raised queue against queues
above their own deserved. On Alibaba's last day a burst of ~110 one-GPU jobs got its deserved 1 → 9 → 25 an
hour at a time and was gone before the share arrived (docs/design.md, "Reaction time"). So
``safety.decide_field`` takes a raise of a waiting queue's deserved up to what it holds plus what it asks for
in one cycle, capped by its deserved target (``target``), or with that target itself lifted to the evidence
(never above its capability target or pool) before Σ deserved is fitted to the cluster (``lift``). Cuts keep
every limit. Those raises share only the room Σ deserved leaves in the cluster (``fit_pending_raises``):
a raise past it would make no queue reclaimable, and the cluster, full of gangs each at or below its
deserved, would leave the raised queue waiting anyway (measured: Alibaba p95 131 → 281 min). With shares
not fitted to the cluster (``fit_deserved_to_cluster: false``) Σ deserved already passes the cluster, there
is no room to share, and fitting would cancel every raise; so a raise is not fitted either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from predictor.planner.safety import beyond_dead_band
from predictor.planner.settings import PROTECTED_QUEUES, PlannerSettings
from predictor.planner.state import QueueState
from predictor.planner.targets import Target, ceil_to, floor_to

__all__ = ["asked", "evidence_targets", "fit_pending_raises", "lift_to_pending", "raise_to", "wants_pending_raise"]

Values = dict[str, dict[str, float]]  # field → resource → GPUs
Notes = dict[tuple[str, str, str], tuple[str, str]]  # (queue, field, resource) → (code, note)


def asked(queue: QueueState, resource: str) -> float:
    """GPUs ``queue`` holds plus those its pending gangs ask for."""
    return queue.allocated.get(resource, 0.0) + queue.pending.get(resource, 0.0)


def raise_to(queue: QueueState, resource: str, settings: PlannerSettings) -> float | None:
    """The evidence a deserved raise may go to at once (``None``: no pending gangs, or the rule is off)."""
    if settings.pending_raise == "off" or queue.pending.get(resource, 0.0) <= 0:
        return None
    return asked(queue, resource)


def evidence_targets(
    per_queue: dict[str, dict[str, Target]], queues: Mapping[str, QueueState], settings: PlannerSettings
) -> None:
    """``lift``: a waiting queue the forecast does not cover yet (new since the model was trained) gets a
    target of its own quota, which ``lift_to_pending`` then lifts; else it would be held (``no_forecast``)
    while its gangs wait, however long. Guarantee and capability targets stay what the queue has."""
    if settings.pending_raise != "lift":
        return
    r = settings.resource
    for name, queue in queues.items():
        if (
            name in per_queue
            or name in PROTECTED_QUEUES
            or not queue.managed
            or r not in queue.deserved
            or raise_to(queue, r, settings) is None
        ):
            continue
        deserved = queue.deserved[r]
        per_queue[name] = {
            r: Target(
                deserved=deserved,
                capability=queue.capability.get(r, deserved),
                guarantee=min(queue.guarantee.get(r, 0.0), deserved),
                basis="no forecast for this queue yet: its own quota",
            )
        }


def lift_to_pending(
    per_queue: dict[str, dict[str, Target]], queues: Mapping[str, QueueState], settings: PlannerSettings
) -> None:
    """Lift each waiting queue's deserved target to ``asked`` (capped by its capability target and pool).

    Runs before the fit, so Σ deserved is still fitted to the cluster with the lifted share in it.
    """
    if settings.pending_raise != "lift":
        return
    for name, wanted in per_queue.items():
        queue = queues.get(name)
        if queue is None or name in PROTECTED_QUEUES:
            continue
        for resource, target in list(wanted.items()):
            evidence = raise_to(queue, resource, settings)
            current = queue.deserved.get(resource, 0.0)
            if evidence is None or not beyond_dead_band(current, evidence, settings):
                continue  # not starving: the same dead band as decide_field's pending raise
            cap = min(target.capability, target.ceiling if target.ceiling is not None else target.capability)
            lifted = ceil_to(min(evidence, cap), settings.round_to)
            if lifted <= target.deserved:
                continue
            wanted[resource] = replace(
                target,
                deserved=lifted,
                capability=max(target.capability, lifted),
                basis=f"{target.basis}, lifted to allocated + pending {evidence:g} (planner.pending_raise)",
            )


def wants_pending_raise(queue: QueueState, mine: Mapping[str, Target] | None, settings: PlannerSettings) -> bool:
    """Whether a queue held by its cooldown has a deserved raise its pending gangs back (planned raise-only)."""
    for resource, target in (mine or {}).items():
        evidence = raise_to(queue, resource, settings)
        current = queue.deserved.get(resource)
        if (
            evidence is not None
            and current is not None
            and beyond_dead_band(current, min(target.deserved, evidence), settings)
        ):
            return True  # the same test as safety.decide_field's pending raise
    return False


def fit_pending_raises(
    queues: Mapping[str, QueueState],
    raised: Mapping[tuple[str, str], float],
    after: dict[str, Values],
    allocatable: Mapping[str, float],
    notes: Notes,
    settings: PlannerSettings,
) -> None:
    """Fit this cycle's pending raises into the room Σ deserved leaves in the cluster.

    ``raised`` maps (queue, resource) to the value each raise falls back to (what every limit allowed). The
    room is the live allocatable GPUs less every other leaf queue's planned deserved and the raised queues'
    fallbacks; the most starved queue (allocated + pending ÷ fallback) takes its raise first, in whole
    rounding units, and a raise cut back is explained. With unfitted shares (``fit_deserved_to_cluster:
    false``) there is no room to share, and nothing is fitted.
    """
    if not settings.fit_deserved_to_cluster:
        return
    parents = {q.parent for q in queues.values() if q.parent}
    leaves = [n for n in after if n not in parents and n not in PROTECTED_QUEUES]
    for resource, limit in allocatable.items():
        base = {n: raised[(n, resource)] for n in leaves if (n, resource) in raised}
        if not base:
            continue
        others = sum(after[n]["deserved"].get(resource, 0.0) for n in leaves if n not in base)
        room = max(limit - others - sum(base.values()), 0.0)
        asked_by = {n: after[n]["deserved"][resource] - base[n] for n in base}
        wanted = sum(asked_by.values())
        if wanted <= room + 1e-9:
            continue
        for name in sorted(base, key=lambda n: -asked(queues[n], resource) / max(base[n], 1.0)):
            extra = min(asked_by[name], floor_to(room, settings.round_to))
            room -= extra
            value = base[name] + extra
            after[name]["deserved"][resource] = value
            guarantee = after[name]["guarantee"].get(resource)
            if guarantee is not None and guarantee > value:
                after[name]["guarantee"][resource] = value
            why = (
                f"raise toward allocated + pending {asked(queues[name], resource):g} cut to {value:g}: Σ deserved "
                f"may not pass live allocatable {limit:g} ({wanted:g} GPUs asked above the step-limited values "
                "by waiting queues, the most starved first)"
            )
            notes[(name, "deserved", resource)] = ("pending_raise", why)
