"""Targets that respect how GPU jobs run: gang floors, whole nodes, pools, and steady high-priority guarantees.

The forecast sizes a queue by GPU count; the scheduler admits *gangs*, on *nodes* the job can land on. Four
rules close that gap, each leaving a ``(field, code, reason)`` note on the target so every raised or clipped
value says why (the codes are in ``decisions.REASON_CODES``):

* ``pool``: a queue's jobs can only use the nodes whose taints they tolerate and whose labels match their
  node selector; no field may promise more than the allocatable GPUs of those nodes (``Target.ceiling``),
  and the queues confined to the same nodes share them: their guarantees together fit those nodes;
* ``whole_nodes``: where every job of the queue takes whole nodes, deserved and capability round up and the
  guarantee down to whole nodes (a 12-GPU deserved for 8-GPU pods is 4 GPUs nobody can use);
* ``gang_floor``: capability is never below the largest pending or recurring gang (Volcano's enqueue gate
  rejects a gang whose ``minResources`` exceeds the capability: it would wait forever). The floor is hard:
  the safety policy's step limits do not apply to it (``Target.capability_floor``);
* ``steady_priority``: the guarantee covers no more than the steady high-priority demand (recurring jobs at
  ``planner.high_priority`` or above, or of unknown priority); low-priority and one-off work is reclaimable
  and needs no reservation.

Missing job data is *unknown*: with no workload nothing changes (no floor, rather than a zero floor); a
queue with no jobs gets no pool (its future jobs' tolerations are unknown); with no job marked recurring
anywhere, steady demand is unknown and the guarantee rule is off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from predictor.planner.settings import PlannerSettings
from predictor.planner.targets import Target, ceil_to, floor_to
from predictor.planner.workload import GPU_RESOURCE, JobSummary, Workload

__all__ = ["hard_bounds", "pool_gpus", "pool_nodes", "shape_targets"]

Key = tuple[str, str]


def pool_nodes(jobs: list[JobSummary], workload: Workload) -> frozenset[str] | None:
    """The nodes at least one of ``jobs`` can run on; ``None`` when there are no jobs (or no nodes)."""
    if not jobs or not workload.nodes:
        return None
    return frozenset(n.name for n in workload.nodes if any(j.can_run_on(n) for j in jobs))


def pool_gpus(jobs: list[JobSummary], workload: Workload) -> float | None:
    """Allocatable GPUs of the nodes at least one of ``jobs`` can run on; ``None`` when there are no jobs."""
    nodes = pool_nodes(jobs, workload)
    return None if nodes is None else float(sum(n.gpus for n in workload.nodes if n.name in nodes))


def _whole_node(jobs: list[JobSummary], node: int) -> bool:
    return bool(jobs) and all(j.gpus_per_pod == node for j in jobs)


def shape_targets(
    targets: Mapping[Key, Target], workload: Workload | None, settings: PlannerSettings
) -> dict[Key, Target]:
    """``targets`` with the four rules applied to the GPU resource; unchanged without a workload."""
    if workload is None:
        return dict(targets)
    any_recurring = any(j.recurring for j in workload.jobs)
    out: dict[Key, Target] = {}
    for key, target in targets.items():
        queue, resource = key
        jobs = workload.queue_jobs(queue)
        out[key] = target if resource != GPU_RESOURCE else _shape(target, jobs, workload, settings, any_recurring)
    _pool_guarantees(out, workload)
    return out


def _pool_guarantees(out: dict[Key, Target], workload: Workload) -> None:
    """Σ guarantee of the queues confined to a set of nodes ≤ the GPUs of those nodes.

    Two queues whose jobs only tolerate the same tainted nodes cannot both be guaranteed all of them. For
    each pool (smallest first), the guarantees of the queues whose pool lies inside it are scaled down by
    one factor (whole GPUs, whole nodes where the queue rounds to them) when they do not fit.
    """
    gpus = {n.name: n.gpus for n in workload.nodes}
    pools = {key: pool_nodes(workload.queue_jobs(key[0]), workload) for key in out if key[1] == GPU_RESOURCE}
    known = {key: nodes for key, nodes in pools.items() if nodes is not None}
    for pool in sorted(set(known.values()), key=lambda p: (len(p), sorted(p))):
        inside = [key for key, nodes in known.items() if nodes <= pool and out[key].guarantee > 0]
        limit = float(sum(gpus[n] for n in pool))
        total = sum(out[key].guarantee for key in inside)
        if total <= limit + 1e-9:
            continue
        for key in inside:
            step = workload.gpus_per_node if _whole_node(workload.queue_jobs(key[0]), workload.gpus_per_node) else 1
            value = floor_to(out[key].guarantee * limit / total, step)
            why = f"lowered so Σ guarantee of the queues confined to these {len(pool)} nodes ≤ their {limit:g} GPUs"
            out[key] = replace(out[key], guarantee=value, notes=(*out[key].notes, ("guarantee", "pool", why)))


def _shape(
    target: Target, jobs: list[JobSummary], workload: Workload, settings: PlannerSettings, any_recurring: bool
) -> Target:
    values = {"deserved": target.deserved, "capability": target.capability, "guarantee": target.guarantee}
    notes: dict[str, tuple[str, str]] = {}

    def move(field: str, value: float, code: str, reason: str) -> None:
        if value != values[field]:
            values[field] = value
            notes[field] = (code, reason)

    node = workload.gpus_per_node
    if _whole_node(jobs, node):
        why = f"rounded to whole {node}-GPU nodes: every job of the queue takes whole nodes"
        move("deserved", ceil_to(values["deserved"], node), "whole_nodes", why)
        move("capability", ceil_to(values["capability"], node), "whole_nodes", why)
        move("guarantee", floor_to(values["guarantee"], node), "whole_nodes", why)
    if any_recurring:
        # An unknown priority counts as high: missing data must not strip a guarantee.
        steady = float(
            sum(j.gpus for j in jobs if j.recurring and (j.priority is None or j.priority >= settings.high_priority))
        )
        if _whole_node(jobs, node):
            steady = floor_to(steady, node)
        if steady < values["guarantee"]:
            move(
                "guarantee",
                steady,
                "steady_priority",
                f"limited to the steady high-priority demand {steady:g} (recurring jobs, priority ≥ "
                f"{settings.high_priority})",
            )
    gangs = [j.gpus for j in jobs if j.phase == "pending" or j.recurring]
    floor = float(max(gangs, default=0))
    pool = pool_gpus(jobs, workload)
    if floor > values["capability"]:
        move("capability", floor, "gang_floor", f"raised to the largest pending or recurring gang {floor:g}")
    if pool is not None:
        for field in ("capability", "deserved", "guarantee"):
            if values[field] > pool:
                move(
                    field,
                    pool,
                    "pool",
                    f"lowered to the {pool:g} GPUs of the nodes this queue's jobs can use (taints, node selectors)",
                )
        if floor > pool:
            notes["capability"] = (
                "pool",
                f"largest gang {floor:g} GPUs exceeds the {pool:g} GPUs of the nodes "
                "its queue can use: it cannot run until the pool grows",
            )
            floor = pool
    values["deserved"] = min(values["deserved"], values["capability"])
    values["guarantee"] = min(values["guarantee"], values["deserved"])
    extra = tuple((f, code, why) for f, (code, why) in sorted(notes.items()))
    return replace(
        target,
        deserved=values["deserved"],
        capability=values["capability"],
        guarantee=values["guarantee"],
        notes=target.notes + extra,
        capability_floor=floor,
        ceiling=pool,
    )


def hard_bounds(
    values: dict[str, dict[str, float]],
    resource: str,
    target: Target,
    allocated: float,
    *,
    deserved_floor: float | None = None,
) -> list[tuple[str, str, str]]:
    """Apply the gang floor and the pool ceiling after the safety policy; ``(field, code, reason)`` per move.

    Both are hard: a capability under the largest gang never admits it, and GPUs beyond the pool cannot be
    scheduled, so neither waits for a step limit or a stabilisation window. Nothing goes below allocated,
    except deserved where ``deserved_floor`` is lower (``predictor.planner.safety.allocated_floor``).
    """
    moved: list[tuple[str, str, str]] = []
    capability = values["capability"].get(resource)
    if target.capability_floor > 0 and capability is not None and capability < target.capability_floor:
        values["capability"][resource] = target.capability_floor
        moved.append(
            ("capability", "gang_floor", f"raised to the largest pending or recurring gang {target.capability_floor:g}")
        )
    if target.ceiling is not None:
        for field in ("capability", "deserved", "guarantee"):
            value = values[field].get(resource)
            lowest = 0.0 if field == "guarantee" else allocated
            if field == "deserved" and deserved_floor is not None:
                lowest = deserved_floor
            if value is not None and value > max(target.ceiling, lowest):
                values[field][resource] = max(target.ceiling, lowest)
                # Say the value written: where allocated is above the pool the field stops there, not at it.
                kept = "" if target.ceiling >= lowest else f"; kept at the {lowest:g} GPUs allocated"
                moved.append(
                    (
                        field,
                        "pool",
                        f"lowered to the {target.ceiling:g} GPUs of the nodes this queue's "
                        f"jobs can use (taints, node selectors){kept}",
                    )
                )
    return moved
