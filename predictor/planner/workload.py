"""What runs and waits on the cluster, as the planner needs it: gangs per queue and GPU nodes with their pools.

Queue quotas that ignore how GPU jobs run promise things the scheduler cannot deliver: a capability below
the largest gang never admits it, a deserved of 12 GPUs for 8-GPU whole-node jobs is 4 GPUs of idle
promise, and GPUs on tainted nodes are no use to a queue whose jobs do not tolerate the taint. These
records carry just enough (gang size, priority, tolerations, node selector; node taints and labels) for
``predictor.planner.gangs`` to respect that, and for ``predictor.planner.fragmentation`` to measure the free
GPUs no typical task can use. They are pure data: the loop builds them from the API's Pod and Node lists
(``workload_from_objects``) or a file; ``None`` for the whole workload means *unknown*, never *empty*.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from predictor.errors import InputError
from predictor.planner.quantity import MAX_GPUS, parse_quantity

__all__ = [
    "GPU_RESOURCE",
    "RECURRING_ANNOTATION",
    "JobSummary",
    "NodeSummary",
    "Taint",
    "Toleration",
    "Workload",
    "node_size",
    "workload_from_objects",
]

GPU_RESOURCE = "nvidia.com/gpu"
QUEUE_LABEL = "volcano.sh/queue-name"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
# Set by whoever launches a job on a schedule (a CronJob template, a pipeline): the job comes back each period.
RECURRING_ANNOTATION = "gpu-capacity-predictor/recurring"
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")  # PreferNoSchedule does not keep a pod off a node
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")  # what the API server accepts
OPERATORS = ("Equal", "Exists")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class Toleration:
    """A pod toleration with Kubernetes matching: empty key + Exists tolerates every taint."""

    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty: every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True)
class JobSummary:
    """One gang: ``pods`` pods of ``gpus_per_pod`` GPUs that start together or not at all."""

    queue: str
    name: str
    pods: int
    gpus_per_pod: int
    phase: str = "pending"  # pending | running
    recurring: bool = False
    priority: int | None = 0  # None: unknown (kube-state-metrics does not export it as a number)
    tolerations: tuple[Toleration, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    nodes: tuple[str, ...] = ()  # one entry per running pod: where it runs

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod

    def can_run_on(self, node: NodeSummary) -> bool:
        """The node's labels match the selector and every blocking taint is tolerated."""
        labels = dict(node.labels)
        if any(labels.get(k) != v for k, v in self.node_selector):
            return False
        return all(
            any(t.tolerates(taint) for t in self.tolerations)
            for taint in node.taints
            if taint.effect in BLOCKING_EFFECTS
        )


@dataclass(frozen=True)
class NodeSummary:
    """A GPU node: allocatable GPUs, how many pods hold, its labels and taints; not-ready nodes count 0."""

    name: str
    gpus: int
    used: int = 0
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()

    @property
    def free(self) -> int:
        return max(self.gpus - self.used, 0)


DEFAULT_NODE_GPUS = 8  # the node size assumed when no GPU node is known (DGX/HGX-class nodes)


def node_size(nodes: Sequence[NodeSummary], default: int = DEFAULT_NODE_GPUS) -> int:
    """The GPUs of the typical schedulable GPU node: the most common allocatable count (the larger on a tie).

    Whole-node jobs, free whole nodes and drain advice are counted in this unit, so it is read from the
    cluster rather than assumed: on 4-GPU nodes an 8-GPU assumption would round guarantees to nodes that
    do not exist. Cordoned or not-ready nodes (0 allocatable here) do not vote; with none, ``default``.
    """
    sizes = Counter(n.gpus for n in nodes if n.gpus > 0)
    if not sizes:
        return default
    return max(sizes, key=lambda size: (sizes[size], size))


@dataclass(frozen=True)
class Workload:
    """The jobs and GPU nodes of one cycle. ``gpus_per_node`` is the node size whole-node jobs take."""

    jobs: tuple[JobSummary, ...]
    nodes: tuple[NodeSummary, ...]
    gpus_per_node: int = DEFAULT_NODE_GPUS

    def queue_jobs(self, queue: str) -> list[JobSummary]:
        return [j for j in self.jobs if j.queue == queue]


def _items(doc: Any, source: str) -> list[Mapping[str, Any]]:
    items = doc.get("items") if isinstance(doc, Mapping) else doc
    if not isinstance(items, Sequence) or isinstance(items, str | bytes):
        raise InputError(f"{source}: expected a List with items (kubectl get … -o json)")
    if not all(isinstance(i, Mapping) for i in items):
        raise InputError(f"{source}: every item must be an object")
    return list(items)


# A hand-edited or truncated file can hold a string where the API returns an object or a list: each read
# below checks the shape, so the user gets one line naming the object and field instead of a traceback.
def _obj(parent: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    """``parent[key]`` as an object (absent or null: empty)."""
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"{where}: {key} must be an object, not {type(value).__name__}")
    return value


def _objects(parent: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
    """``parent[key]`` as a list of objects (absent or null: empty)."""
    value = parent.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise InputError(f"{where}: {key} must be a list of objects")
    return value


def _gpus(value: object, what: str) -> int:
    """A GPU quantity as whole GPUs; above ``MAX_GPUS`` is a unit mistake, not a cluster (it would become a
    capability floor of that many GPUs)."""
    gpus = parse_quantity(value, what=what)
    if gpus > MAX_GPUS:
        raise InputError(f"{what}: {value!r} is above {MAX_GPUS:g} GPUs")
    return round(gpus)


def _pod_gpus(pod: Mapping[str, Any], where: str) -> int:
    total = 0
    for container in _objects(_obj(pod, "spec", where), "containers", f"{where} spec"):
        requests = _obj(_obj(container, "resources", f"{where} container"), "requests", f"{where} container")
        if GPU_RESOURCE in requests:
            total += _gpus(requests[GPU_RESOURCE], f"{where} {GPU_RESOURCE}")
    return total


def _node(item: Mapping[str, Any], used: Mapping[str, int], source: str, index: int) -> NodeSummary | None:
    meta = _obj(item, "metadata", f"{source}: item {index}")
    name = str(meta.get("name", "?"))
    where = f"{source}: node {name!r}"
    spec, status = _obj(item, "spec", where), _obj(item, "status", where)
    allocatable = _obj(status, "allocatable", f"{where} status").get(GPU_RESOURCE)
    if allocatable is None:
        return None  # not a GPU node
    gpus = _gpus(allocatable, f"{where} {GPU_RESOURCE}")
    ready = [c for c in status.get("conditions") or [] if isinstance(c, Mapping) and c.get("type") == "Ready"]
    if spec.get("unschedulable") or (ready and ready[0].get("status") != "True"):
        gpus = 0  # cordoned or NotReady: nothing new lands there
    taints = tuple(_taint(t, where) for t in _objects(spec, "taints", f"{where} spec"))
    labels = tuple(sorted((str(k), str(v)) for k, v in _obj(meta, "labels", f"{where} metadata").items()))
    return NodeSummary(name, gpus, min(used.get(name, 0), gpus) if gpus else 0, labels, taints)


def _taint(t: Mapping[str, Any], where: str) -> Taint:
    """A node taint; the API server requires a key and one of the three effects, and so do we (a taint we
    misread would put a node in or out of a queue's pool)."""
    key, effect = str(t.get("key") or ""), str(t.get("effect") or "")
    if not key or effect not in TAINT_EFFECTS:
        raise InputError(f"{where}: taint {dict(t)!r} needs a key and an effect of {', '.join(TAINT_EFFECTS)}")
    return Taint(key, str(t.get("value") or ""), effect)


def _toleration(t: Mapping[str, Any], where: str) -> Toleration:
    """A pod toleration, checked as the API server checks it (operator Equal|Exists, a known effect)."""
    operator, effect = str(t.get("operator") or "Equal"), str(t.get("effect") or "")
    if operator not in OPERATORS or (effect and effect not in TAINT_EFFECTS):
        raise InputError(
            f"{where}: toleration {dict(t)!r} needs operator Equal or Exists and an effect of "
            f"{', '.join(TAINT_EFFECTS)} (or none)"
        )
    return Toleration(str(t.get("key") or ""), operator, str(t.get("value") or ""), effect)


def workload_from_objects(
    pods: Any, nodes: Any, *, gpus_per_node: int | None = None, source: str = "live", node_source: str | None = None
) -> Workload:
    """Gangs from a Pod list (grouped by PodGroup annotation, else Volcano job name) and GPU nodes from a
    Node list. Pods without a queue label or without GPUs are left out; finished pods too. Errors name
    ``source`` (``node_source`` for the Node list, when it came from another file). ``gpus_per_node``:
    by default the nodes' typical size (``node_size``)."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    used: dict[str, int] = {}
    for i, pod in enumerate(_items(pods, f"{source} pods")):
        meta = _obj(pod, "metadata", f"{source} pods: item {i}")
        where = f"{source} pods: pod {meta.get('name', '?')!r}"
        spec, labels = _obj(pod, "spec", where), _obj(meta, "labels", f"{where} metadata")
        phase = str(_obj(pod, "status", where).get("phase", "Pending"))
        queue = labels.get(QUEUE_LABEL)
        gpus = _pod_gpus(pod, where)
        if phase not in ("Pending", "Running") or gpus <= 0:
            continue
        if phase == "Running" and spec.get("nodeName"):
            used[str(spec["nodeName"])] = used.get(str(spec["nodeName"]), 0) + gpus
        if queue is None:
            continue
        group = (
            _obj(meta, "annotations", f"{where} metadata").get(GROUP_ANNOTATION)
            or labels.get("volcano.sh/job-name")
            or meta.get("name", "?")
        )
        groups.setdefault((str(meta.get("namespace", "")), str(group)), []).append(pod)
    jobs = [_job(f"{ns}/{group}", members, f"{source} pods") for (ns, group), members in sorted(groups.items())]
    node_list = [
        n
        for n in (
            _node(item, used, node_source or f"{source} nodes", i)
            for i, item in enumerate(_items(nodes, node_source or f"{source} nodes"))
        )
        if n
    ]
    return Workload(tuple(jobs), tuple(node_list), gpus_per_node or node_size(node_list))


def _job(name: str, pods: list[Mapping[str, Any]], source: str) -> JobSummary:
    first = pods[0]
    meta, spec = first["metadata"], first.get("spec") or {}  # both checked by workload_from_objects
    where = f"{source}: pod {meta.get('name', '?')!r}"
    tolerations = tuple(_toleration(t, where) for t in _objects(spec, "tolerations", f"{where} spec"))
    selector = tuple(sorted((str(k), str(v)) for k, v in _obj(spec, "nodeSelector", f"{where} spec").items()))
    priority = spec.get("priority") or 0
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InputError(f"{where}: spec.priority {priority!r} is not an integer")
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    recurring = str((meta.get("annotations") or {}).get(RECURRING_ANNOTATION, "")).lower() == "true"
    gpus_per_pod = max(_pod_gpus(p, where) for p in pods)
    if len(pods) * gpus_per_pod > MAX_GPUS:
        raise InputError(f"{source}: gang {name!r} asks for {len(pods) * gpus_per_pod} GPUs, above {MAX_GPUS:g}")
    return JobSummary(
        queue=str(meta["labels"][QUEUE_LABEL]),
        name=name,
        pods=len(pods),
        gpus_per_pod=gpus_per_pod,
        phase="running" if running else "pending",
        recurring=recurring,
        priority=priority,
        tolerations=tolerations,
        node_selector=selector,
        nodes=tuple(str((p.get("spec") or {}).get("nodeName")) for p in running),
    )
