"""The planner's view of the live cluster: Volcano Queue objects and node allocatable, parsed once.

Input is what ``kubectl get queues.scheduling.volcano.sh -o json`` and ``kubectl get nodes -o json``
print (or the same objects read through the API). Parsing here, with errors naming the object, keeps the
pure planner free of dict-walking and of quantity strings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from predictor.errors import InputError
from predictor.names import is_dns1123_subdomain
from predictor.planner.quantity import MILLI, bounded, parse_quantity
from predictor.planner.selection import MANAGE_ALL, MANAGED_ANNOTATION, ManagedQueues

__all__ = [
    "FIELDS",
    "MANAGED_ANNOTATION",
    "QueueState",
    "allocatable_from_nodes",
    "check_queue_name",
    "gpu_nodes_not_ready",
    "is_queue_name",
    "queues_from_list",
]

FIELDS = ("guarantee", "deserved", "capability")
Resources = Mapping[str, float]
MAX_WEIGHT = 65535  # the Volcano Queue CRD's bound on spec.weight


def is_queue_name(name: object) -> bool:
    """Whether ``name`` is a valid Queue name: a DNS-1123 subdomain, as the API server enforces for
    ``metadata.name``, so never a path (``../x``, ``/tmp/x``), never empty, at most 253 characters."""
    return is_dns1123_subdomain(name)


def check_queue_name(name: object, *, source: str) -> str:
    """``name`` if it is a valid Queue name, else an ``InputError`` naming ``source``.

    Queue names become file names (``plans/queues/<name>.yaml``) and metric labels; checking them where
    they enter (queue lists, forecast series ids) keeps a name like ``../../x`` out of every path.
    """
    if not is_queue_name(name):
        raise InputError(
            f"{source}: {name!r} is not a valid queue name (a DNS-1123 subdomain: lower-case "
            "letters, digits, '-' and '.', at most 253 characters)"
        )
    return str(name)


def _frozen(values: Mapping[str, float]) -> Mapping[str, float]:
    return MappingProxyType(dict(values))


@dataclass(frozen=True)
class QueueState:
    """One Queue as the planner needs it; quotas in GPUs (floats), absent resources are unset."""

    name: str
    deserved: Resources = field(default_factory=dict)
    capability: Resources = field(default_factory=dict)
    guarantee: Resources = field(default_factory=dict)
    allocated: Resources = field(default_factory=dict)
    # GPUs its pending gangs ask for, where known (the replay's simulator; the live loop from the workload's
    # pending gangs, predictor.loop.react, since a Queue's status does not say): bounds the guarantee with
    # planner.guarantee_within_demand, backs planner.pending_raise and planner.react_pending_gpus.
    pending: Resources = field(default_factory=dict)
    weight: int = 1
    parent: str | None = None
    managed: bool = True
    resource_version: str | None = None
    # spec.reclaimable (Volcano's webhook defaults it to true): false means reclaim never takes back what the
    # queue holds above its deserved, so the planner lets it borrow nothing (predictor.planner.queue_targets).
    reclaimable: bool = True

    def get(self, name: str) -> Resources:
        """One of ``guarantee``, ``deserved``, ``capability`` by name."""
        value: Resources = getattr(self, name)
        return value


def _resources(obj: Any, what: str, *, milli: bool = False) -> dict[str, float]:
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise InputError(f"{what}: expected a mapping of resource quantities, got {type(obj).__name__}")
    scale = 1.0 / MILLI if milli else 1.0
    return {
        str(k): bounded(str(k), parse_quantity(v, what=f"{what}[{k}]") * scale, what=f"{what}[{k}]", value=v)
        for k, v in obj.items()
    }


def queue_from_object(
    obj: Mapping[str, Any],
    *,
    source: str = "queue",
    allocated_milli: bool = False,
    manage: ManagedQueues = MANAGE_ALL,
) -> QueueState:
    """Parse one Queue object (a dict as the API returns it); ``manage`` decides whether it is managed."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        raise InputError(f"{source}: a Queue object has no metadata.name")
    name = check_queue_name(meta["name"], source=source)
    where = f"{source}: queue {name!r}"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if not isinstance(spec, Mapping) or not isinstance(status, Mapping):
        raise InputError(f"{where}: spec and status must be mappings")
    guarantee = spec.get("guarantee") or {}
    if not isinstance(guarantee, Mapping):
        raise InputError(f"{where}: spec.guarantee must be a mapping")
    weight = spec.get("weight", 1)
    if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= MAX_WEIGHT:
        raise InputError(f"{where}: spec.weight must be an integer 1 … {MAX_WEIGHT}, got {weight!r}")
    annotations, labels = meta.get("annotations") or {}, meta.get("labels") or {}
    if not isinstance(annotations, Mapping) or not isinstance(labels, Mapping):
        raise InputError(f"{where}: metadata.annotations and metadata.labels must be mappings")
    managed = manage.manages({str(k): str(v) for k, v in labels.items()}, annotations)
    parent = spec.get("parent")
    reclaimable = spec.get("reclaimable", True)
    if not isinstance(reclaimable, bool):
        raise InputError(f"{where}: spec.reclaimable must be true or false, got {reclaimable!r}")
    return QueueState(
        name=name,
        deserved=_frozen(_resources(spec.get("deserved"), f"{where} spec.deserved")),
        capability=_frozen(_resources(spec.get("capability"), f"{where} spec.capability")),
        guarantee=_frozen(_resources(guarantee.get("resource"), f"{where} spec.guarantee.resource")),
        allocated=_frozen(_resources(status.get("allocated"), f"{where} status.allocated", milli=allocated_milli)),
        weight=weight,
        parent=parent if isinstance(parent, str) and parent else None,
        managed=managed,
        resource_version=meta.get("resourceVersion"),
        reclaimable=reclaimable,
    )


def queues_from_list(
    doc: Any, *, source: str = "queues", allocated_milli: bool = False, manage: ManagedQueues = MANAGE_ALL
) -> list[QueueState]:
    """Queues from a ``QueueList``/``List`` document (``kubectl get queues -o json``) or a bare list.

    ``manage``: which queues are managed (the settings' ``actuators.queues.manage``); by default every queue
    not annotated ``gpu-capacity-predictor/managed: "false"``."""
    items = doc.get("items") if isinstance(doc, Mapping) else doc
    if not isinstance(items, Sequence) or isinstance(items, str | bytes):
        raise InputError(f"{source}: expected a List with items (kubectl get queues -o json)")
    queues = []
    for item in items:
        if not isinstance(item, Mapping):
            raise InputError(f"{source}: every item must be a Queue object")
        kind = item.get("kind", "Queue")
        if kind != "Queue":
            raise InputError(f"{source}: expected kind Queue, got {kind!r}")
        queues.append(queue_from_object(item, source=source, allocated_milli=allocated_milli, manage=manage))
    names = [q.name for q in queues]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise InputError(f"{source}: queue {dup!r} appears twice")
    return queues


def allocatable_from_nodes(doc: Any, resources: Sequence[str], *, source: str = "nodes") -> dict[str, float]:
    """Σ allocatable per resource over Ready, schedulable nodes (a failed or cordoned node lowers it)."""
    items = doc.get("items") if isinstance(doc, Mapping) else doc
    if not isinstance(items, Sequence) or isinstance(items, str | bytes):
        raise InputError(f"{source}: expected a List with items (kubectl get nodes -o json)")
    total = dict.fromkeys(resources, 0.0)
    for item in items:
        if not isinstance(item, Mapping) or not all(
            isinstance(item.get(k) or {}, Mapping) for k in ("metadata", "spec", "status")
        ):
            raise InputError(f"{source}: every item must be a Node object (metadata, spec, status objects)")
        name = (item.get("metadata") or {}).get("name", "?")
        if (item.get("spec") or {}).get("unschedulable"):
            continue
        conditions = (item.get("status") or {}).get("conditions") or []
        ready = [c for c in conditions if isinstance(c, Mapping) and c.get("type") == "Ready"]
        if ready and ready[0].get("status") != "True":
            continue
        allocatable = (item.get("status") or {}).get("allocatable") or {}
        if not isinstance(allocatable, Mapping):
            raise InputError(f"{source}: node {name!r} status.allocatable must be an object")
        for resource in resources:
            if resource in allocatable:
                what = f"{source}: node {name!r} {resource}"
                value = allocatable[resource]
                total[resource] += bounded(resource, parse_quantity(value, what=what), what=what, value=value)
    return total


def gpu_nodes_not_ready(doc: Any, resources: Sequence[str]) -> tuple[int, int]:
    """``(not ready or cordoned, all)`` over the nodes that have any of ``resources`` in capacity or allocatable.

    What a first cycle judges a collapse by when it has no capacity reference of its own: a NotReady node
    keeps its capacity in its status, so the share of GPU nodes that cannot run work is known without history.
    """
    items = doc.get("items") if isinstance(doc, Mapping) else doc
    if not isinstance(items, Sequence) or isinstance(items, str | bytes):
        return 0, 0
    down = total = 0
    for item in items:
        if not isinstance(item, Mapping):
            continue
        status: Mapping[str, Any] = item["status"] if isinstance(item.get("status"), Mapping) else {}
        spec: Mapping[str, Any] = item["spec"] if isinstance(item.get("spec"), Mapping) else {}
        amounts: list[Mapping[str, Any]] = [
            status[key] for key in ("capacity", "allocatable") if isinstance(status.get(key), Mapping)
        ]
        if not any(_positive(amount.get(r)) for amount in amounts for r in resources):
            continue
        total += 1
        conditions = status.get("conditions") or []
        ready = [c for c in conditions if isinstance(c, Mapping) and c.get("type") == "Ready"]
        cordoned = bool(spec.get("unschedulable"))
        if cordoned or not ready or ready[0].get("status") != "True":
            down += 1
    return down, total


def _positive(value: Any) -> bool:
    if value is None:
        return False
    try:
        return parse_quantity(value, what="node quantity") > 0
    except InputError:
        return False
