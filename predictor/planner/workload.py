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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from predictor.errors import InputError
from predictor.planner.quantity import parse_quantity

__all__ = [
    "GPU_RESOURCE",
    "RECURRING_ANNOTATION",
    "JobSummary",
    "NodeSummary",
    "Taint",
    "Toleration",
    "Workload",
    "workload_from_objects",
]

GPU_RESOURCE = "nvidia.com/gpu"
QUEUE_LABEL = "volcano.sh/queue-name"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
# Set by whoever launches a job on a schedule (a CronJob template, a pipeline): the job comes back each period.
RECURRING_ANNOTATION = "gpu-capacity-predictor/recurring"
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")  # PreferNoSchedule does not keep a pod off a node


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
        return all(any(t.tolerates(taint) for t in self.tolerations)
                   for taint in node.taints if taint.effect in BLOCKING_EFFECTS)


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


@dataclass(frozen=True)
class Workload:
    """The jobs and GPU nodes of one cycle. ``gpus_per_node`` is the node size whole-node jobs take."""

    jobs: tuple[JobSummary, ...]
    nodes: tuple[NodeSummary, ...]
    gpus_per_node: int = 8

    def queue_jobs(self, queue: str) -> list[JobSummary]:
        return [j for j in self.jobs if j.queue == queue]


def _items(doc: Any, source: str) -> list[Mapping[str, Any]]:
    items = doc.get("items") if isinstance(doc, Mapping) else doc
    if not isinstance(items, Sequence) or isinstance(items, str | bytes):
        raise InputError(f"{source}: expected a List with items (kubectl get … -o json)")
    if not all(isinstance(i, Mapping) for i in items):
        raise InputError(f"{source}: every item must be an object")
    return list(items)


def _pod_gpus(pod: Mapping[str, Any], source: str) -> int:
    name = (pod.get("metadata") or {}).get("name", "?")
    total = 0.0
    for container in (pod.get("spec") or {}).get("containers") or []:
        requests = ((container or {}).get("resources") or {}).get("requests") or {}
        if GPU_RESOURCE in requests:
            total += parse_quantity(requests[GPU_RESOURCE], what=f"{source}: pod {name!r} {GPU_RESOURCE}")
    return round(total)


def _node(item: Mapping[str, Any], used: Mapping[str, int], source: str) -> NodeSummary | None:
    meta, spec, status = item.get("metadata") or {}, item.get("spec") or {}, item.get("status") or {}
    name = str(meta.get("name", "?"))
    allocatable = (status.get("allocatable") or {}).get(GPU_RESOURCE)
    if allocatable is None:
        return None  # not a GPU node
    gpus = round(parse_quantity(allocatable, what=f"{source}: node {name!r} {GPU_RESOURCE}"))
    ready = [c for c in status.get("conditions") or [] if isinstance(c, Mapping) and c.get("type") == "Ready"]
    if spec.get("unschedulable") or (ready and ready[0].get("status") != "True"):
        gpus = 0  # cordoned or NotReady: nothing new lands there
    taints = tuple(Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "")))
                   for t in spec.get("taints") or [] if isinstance(t, Mapping))
    labels = tuple(sorted((str(k), str(v)) for k, v in (meta.get("labels") or {}).items()))
    return NodeSummary(name, gpus, min(used.get(name, 0), gpus) if gpus else 0, labels, taints)


def workload_from_objects(pods: Any, nodes: Any, *, gpus_per_node: int = 8, source: str = "live") -> Workload:
    """Gangs from a Pod list (grouped by PodGroup annotation, else Volcano job name) and GPU nodes from a
    Node list. Pods without a queue label or without GPUs are left out; finished pods too."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    used: dict[str, int] = {}
    for pod in _items(pods, f"{source} pods"):
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        phase = str((pod.get("status") or {}).get("phase", "Pending"))
        queue = (meta.get("labels") or {}).get(QUEUE_LABEL)
        gpus = _pod_gpus(pod, f"{source} pods")
        if phase not in ("Pending", "Running") or gpus <= 0:
            continue
        if phase == "Running" and spec.get("nodeName"):
            used[str(spec["nodeName"])] = used.get(str(spec["nodeName"]), 0) + gpus
        if queue is None:
            continue
        group = (meta.get("annotations") or {}).get(GROUP_ANNOTATION) or \
            (meta.get("labels") or {}).get("volcano.sh/job-name") or meta.get("name", "?")
        groups.setdefault((str(meta.get("namespace", "")), str(group)), []).append(pod)
    jobs = [_job(f"{ns}/{group}", members, f"{source} pods") for (ns, group), members in sorted(groups.items())]
    node_list = [n for n in (_node(i, used, f"{source} nodes") for i in _items(nodes, f"{source} nodes")) if n]
    return Workload(tuple(jobs), tuple(node_list), gpus_per_node)


def _job(name: str, pods: list[Mapping[str, Any]], source: str) -> JobSummary:
    first = pods[0]
    meta, spec = first.get("metadata") or {}, first.get("spec") or {}
    tolerations = tuple(Toleration(str(t.get("key") or ""), str(t.get("operator") or "Equal"),
                                   str(t.get("value") or ""), str(t.get("effect") or ""))
                        for t in spec.get("tolerations") or [] if isinstance(t, Mapping))
    selector = tuple(sorted((str(k), str(v)) for k, v in (spec.get("nodeSelector") or {}).items()))
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    recurring = str((meta.get("annotations") or {}).get(RECURRING_ANNOTATION, "")).lower() == "true"
    return JobSummary(
        queue=str(meta["labels"][QUEUE_LABEL]), name=name, pods=len(pods),
        gpus_per_pod=max(_pod_gpus(p, source) for p in pods), phase="running" if running else "pending",
        recurring=recurring, priority=int(spec.get("priority") or 0), tolerations=tolerations,
        node_selector=selector, nodes=tuple(str((p.get("spec") or {}).get("nodeName")) for p in running))
