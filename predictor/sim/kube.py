"""Volcano scheduler and kube-state-metrics series: queue quotas and usage, nodes, pods.

Volcano reports scalar resources in milli-units (1 GPU = 1000) with the raw resource name
``nvidia.com/gpu``; kube-state-metrics sanitises it to ``nvidia_com_gpu`` with ``unit="integer"``. Both
quirks are reproduced exactly because queries written against this history must work unchanged on a
real cluster. Pods exist from submission (Pending, no node) until their gang ends.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd

from predictor.sim.dcgm import pod_name
from predictor.sim.effects import oom_phases
from predictor.sim.occupancy import Occupancy
from predictor.sim.scheduler import SchedulerResult
from predictor.sim.series import Family, Series, StepGrid, epoch_s

__all__ = ["kube_families", "volcano_families"]

_GPU = "nvidia.com/gpu"
PodSpan = tuple[dict[str, str], float, float, float]  # extra labels, from (s), to (s), value
_NS = uuid.UUID("0f6c3f1e-8a7b-4c55-b1d2-7e0e5a6c9d21")
_KSM_GPU = {"resource": "nvidia_com_gpu", "unit": "integer"}  # how kube-state-metrics names the GPU resource
_NodeVariant = tuple[dict[str, str], Callable[[int], np.ndarray]]  # extra labels, node index → values per step


def _sample(times_s: np.ndarray, event_s: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Step-function value of ``values`` (rows at ``event_s``) at each time; zeros before the first."""
    idx = np.searchsorted(event_s, times_s, side="right") - 1
    out = values[np.maximum(idx, 0)].astype(np.float64)
    out[idx < 0] = 0
    return out


def volcano_families(sched: SchedulerResult, o: Occupancy) -> list[Family]:
    times = o.grid.times_s()
    steps = np.arange(o.grid.n_steps)
    alloc = _sample(times, sched.timeline_s, sched.allocated)
    pend = _sample(times, sched.timeline_s, sched.pending_gpus)
    pend_jobs = _sample(times, sched.timeline_s, sched.pending_jobs)
    run_jobs = _sample(times, sched.timeline_s, sched.running_jobs)
    ready = (
        _sample(times, sched.timeline_s, sched.ready_gpus[:, None])[:, 0]
        if len(sched.ready_gpus)
        else np.full(len(times), o.cluster.n_gpus, dtype=float)
    )
    ready[ready == 0] = o.cluster.n_gpus
    deserved = _sample(times, sched.quota_s, sched.deserved)
    capability = np.minimum(_sample(times, sched.quota_s, sched.capability), o.cluster.n_gpus)
    real_cap = np.minimum(capability, ready[:, None])
    names = sched.queue_names

    def fam(name: str, help_: str, values: Callable[[], np.ndarray], scalar: bool, decimals: int = 0) -> Family:
        def series() -> Iterator[Series]:
            m = values()
            for qi, queue in enumerate(names):
                labels = {"queue_name": queue, "resource": _GPU} if scalar else {"queue_name": queue}
                yield labels, steps, m[:, qi]

        return Family(name, "gauge", help_, series, decimals)

    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(deserved > 0, alloc / np.where(deserved > 0, deserved, 1), 0.0)
    return [
        fam(
            "volcano_queue_allocated_scalar_resources",
            "Allocated scalar resources in queue (milli).",
            lambda: alloc * 1000,
            True,
        ),
        fam(
            "volcano_queue_request_scalar_resources",
            "Requested scalar resources in queue (milli).",
            lambda: (alloc + pend) * 1000,
            True,
        ),
        fam(
            "volcano_queue_deserved_scalar_resources",
            "Deserved scalar resources in queue (milli).",
            lambda: deserved * 1000,
            True,
        ),
        fam(
            "volcano_queue_capacity_scalar_resources",
            "Capability scalar resources in queue (milli).",
            lambda: capability * 1000,
            True,
        ),
        fam(
            "volcano_queue_real_capacity_scalar_resources",
            "Real capability scalar resources in queue (milli).",
            lambda: real_cap * 1000,
            True,
        ),
        fam(
            "volcano_queue_pod_group_pending_count",
            "The number of pending PodGroups in this queue.",
            lambda: pend_jobs,
            False,
        ),
        fam(
            "volcano_queue_pod_group_running_count",
            "The number of running PodGroups in this queue.",
            lambda: run_jobs,
            False,
        ),
        fam("volcano_queue_share", "Share for one queue.", lambda: share, False, decimals=4),
        fam("volcano_queue_overused", "If one queue is overused.", lambda: (alloc >= deserved) * 1.0, False),
    ]


def _pods(sched: SchedulerResult, o: Occupancy, unstarted: pd.DataFrame) -> pd.DataFrame:
    """One row per pod lifetime: (job, attempt, rank) with submit/start/end seconds and node."""
    g = o.cluster.gpus_per_node
    names = o.cluster.node_names()
    a = sched.attempts
    rows: dict[str, list[object]] = {
        k: [] for k in ("job_id", "queue", "attempt", "rank", "node", "gpus", "pending_s", "start_s", "end_s")
    }
    sub = epoch_s(a["submit"])
    start = epoch_s(a["start"])
    end = epoch_s(a["end"])
    pend_from = sub.copy()
    # A requeued attempt's pods are recreated when the previous attempt was killed.
    prev_end: dict[str, int] = {}
    for i, (job_id, queue, attempt) in enumerate(zip(a["job_id"], a["queue"], a["attempt"], strict=True)):
        if attempt > 0:
            pend_from[i] = prev_end.get(job_id, sub[i])
        prev_end[job_id] = int(end[i])
        nodes, counts = np.unique(sched.attempt_gpus[i] // g, return_counts=True)
        for rank, (node, count) in enumerate(zip(nodes, counts, strict=True)):
            for key, value in (
                ("job_id", job_id),
                ("queue", queue),
                ("attempt", attempt),
                ("rank", rank),
                ("node", names[node]),
                ("gpus", int(count)),
                ("pending_s", int(pend_from[i])),
                ("start_s", int(start[i])),
                ("end_s", int(end[i])),
            ):
                rows[key].append(value)
    never = o.grid.end_s + 1
    tries = a["job_id"].value_counts().to_dict()
    for job_id, queue, gpus, submit in zip(
        unstarted["job_id"], unstarted["queue"], unstarted["num_gpus"], epoch_s(unstarted["submit"]), strict=True
    ):
        # A job requeued after its node failed waits as a new set of pods (next attempt number).
        attempt = int(tries.get(job_id, 0))
        pending_from = prev_end.get(job_id, int(submit)) if attempt else int(submit)
        for rank in range(-(-int(gpus) // g)):
            for key, value in (
                ("job_id", job_id),
                ("queue", queue),
                ("attempt", attempt),
                ("rank", rank),
                ("node", ""),
                ("gpus", min(g, int(gpus) - rank * g)),
                ("pending_s", pending_from),
                ("start_s", never),
                ("end_s", never),
            ):
                rows[key].append(value)
    return pd.DataFrame(rows)


def kube_families(sched: SchedulerResult, o: Occupancy, unstarted: pd.DataFrame) -> list[Family]:
    """kube-state-metrics' node and pod families; values are made when a family is read."""
    grid = o.grid
    names = o.cluster.node_names()
    pods = _pods(sched, o, unstarted)
    unhealthy = _unhealthy_gpus(o)
    g = float(o.cluster.gpus_per_node)
    ready = o.node_ready.astype(np.float64)
    oom = _OomCrashes(o)

    def node_fam(name: str, help_: str, variants: list[_NodeVariant]) -> Family:
        return _node_family(name, help_, names, grid.n_steps, variants)

    def pod_fam(name: str, help_: str, rows: Callable[[Any], Iterator[PodSpan]], kind: str = "gauge") -> Family:
        return _pod_family(name, help_, pods, grid, rows, kind)

    return [
        node_fam(
            "kube_node_status_capacity",
            "The capacity for different resources of a node.",
            [(_KSM_GPU, lambda n: np.full(grid.n_steps, g))],
        ),
        node_fam(
            "kube_node_status_allocatable",
            "The allocatable for different resources of a node.",
            [(_KSM_GPU, lambda n: np.maximum(g - unhealthy[n], 0))],
        ),
        node_fam(
            "kube_node_status_condition",
            "The condition of a cluster node.",
            [
                ({"condition": "Ready", "status": "true"}, lambda n: ready[n]),
                ({"condition": "Ready", "status": "false"}, lambda n: np.zeros(grid.n_steps)),
                ({"condition": "Ready", "status": "unknown"}, lambda n: 1 - ready[n]),
            ],
        ),
        pod_fam("kube_pod_container_resource_requests", "The number of requested resource by a container.", _requests),
        pod_fam("kube_pod_labels", "Kubernetes labels converted to Prometheus labels.", _pod_labels),
        pod_fam("kube_pod_status_phase", "The pods current phase.", _phase),
        pod_fam(
            "kube_pod_container_status_restarts_total",
            "The number of container restarts per container.",
            oom.restarts,
            kind="counter",
        ),
        pod_fam(
            "kube_pod_container_status_last_terminated_reason",
            "Describes the last reason the container was in terminated state.",
            oom.last_reason,
        ),
    ]


def _unhealthy_gpus(o: Occupancy) -> np.ndarray:
    """[nodes, steps]: GPUs the device plugin marks unhealthy (XID 48 and 79 take a GPU off allocatable)."""
    unhealthy = np.zeros((o.cluster.n_nodes, o.grid.n_steps))
    for f in o.faults:
        if f.cause == "gpu_hardware" and f.xid in (48, 79):
            k0, k1 = f.steps(o.grid)
            unhealthy[f.node, k0:k1] += 1
    return unhealthy


def _node_family(name: str, help_: str, names: list[str], n_steps: int, variants: list[_NodeVariant]) -> Family:
    """One gauge series per node and variant, at every step."""
    all_steps = np.arange(n_steps)

    def series() -> Iterator[Series]:
        for labels, values in variants:
            for n, node in enumerate(names):
                yield {"node": node, **labels}, all_steps, values(n)

    return Family(name, "gauge", help_, series)


def _pod_family(
    name: str, help_: str, pods: pd.DataFrame, grid: StepGrid, rows: Callable[[Any], Iterator[PodSpan]], kind: str
) -> Family:
    """``rows(pod)`` yields (extra labels, from_s, to_s, value): one series per pod and label set."""

    def series() -> Iterator[Series]:
        for pod in pods.itertuples(index=False):
            base = {
                "namespace": str(pod.queue),
                "pod": pod_name(str(pod.job_id), int(str(pod.rank))),
                "uid": str(uuid.uuid5(_NS, f"{pod.job_id}/{pod.attempt}/{pod.rank}")),
            }
            for extra, t0, t1, value in rows(pod):  # type: ignore[arg-type]
                k0, k1 = grid.step_range(t0, t1)
                if k1 > k0:
                    yield {**base, **extra}, np.arange(k0, k1), np.full(k1 - k0, value)

    return Family(name, kind, help_, series)  # type: ignore[arg-type]


def _requests(pod: Any) -> Iterator[PodSpan]:
    labels = {"container": "main", **_KSM_GPU}
    yield {**labels, "node": ""}, pod.pending_s, pod.start_s, float(pod.gpus)
    yield {**labels, "node": str(pod.node)}, pod.start_s, pod.end_s, float(pod.gpus)


def _pod_labels(pod: Any) -> Iterator[PodSpan]:
    yield (
        {"label_volcano_sh_queue_name": str(pod.queue), "label_volcano_sh_job_name": f"job-{pod.job_id}"},
        pod.pending_s,
        pod.end_s,
        1.0,
    )


def _phase(pod: Any) -> Iterator[PodSpan]:
    yield {"phase": "Pending"}, pod.pending_s, pod.start_s, 1.0
    yield {"phase": "Running"}, pod.start_s, pod.end_s, 1.0


class _OomCrashes:
    """Restarts and last terminated reason of the pods hit by an injected GPU out-of-memory fault."""

    def __init__(self, o: Occupancy) -> None:
        self.grid = o.grid
        self.names = o.cluster.node_names()
        self.oom = {f.job_id: f for f in o.faults if f.cause == "gpu_oom"}

    def crash_steps(self, pod: Any) -> list[int]:
        f = self.oom.get(str(pod.job_id))
        if f is None or str(pod.node) != self.names[f.node] or not pod.start_s <= f.start_s < pod.end_s:
            return []
        return oom_phases(*f.steps(self.grid), self.grid.step_s)[2]

    def restarts(self, pod: Any) -> Iterator[PodSpan]:
        crashes = self.crash_steps(pod)
        if not crashes:
            return
        times = [self.grid.start_s + k * self.grid.step_s for k in crashes]
        edges = [float(pod.start_s), *times, float(pod.end_s)]
        for i in range(len(edges) - 1):
            yield {"container": "main"}, edges[i], edges[i + 1], float(i)

    def last_reason(self, pod: Any) -> Iterator[PodSpan]:
        crashes = self.crash_steps(pod)
        if crashes:
            # A CUDA out-of-memory error kills the training process (exit 1): the kubelet reports "Error".
            # "OOMKilled" would mean the host-memory cgroup limit, a different failure.
            start = self.grid.start_s + crashes[0] * self.grid.step_s
            yield {"container": "main", "reason": "Error"}, start, pod.end_s, 1.0
