"""The project's named PromQL queries: each family of query is written once, here.

A forecaster fitted on one query's series and then served another's is trained on data it never sees
in production (there once were three different queue-demand queries: training, the loop and the reports).
So training (``pipelines.forecast``), the loop (``predictor.loop.SourceHistory``), the reports
(``predictor.reports.inputs``) and right-sizing import their PromQL from this module instead of writing
it, and ``tests/sources/test_queries.py`` checks that every consumer resolves a family to the text here.

Selectors are built with ``Selector`` so label values are escaped; every per-queue query ends in exactly
one ``queue_name`` label, which is what the loop and the planner join Queue objects on.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

import pandas as pd

from predictor.sources.promql import Selector

if TYPE_CHECKING:
    from predictor.sources import MetricSource

__all__ = [
    "CATALOGUE",
    "CLUSTER_ALLOCATABLE",
    "CLUSTER_DEMAND",
    "GPU_RESOURCE",
    "KSM_GPU_REQUESTS",
    "KSM_GPU_RESOURCE",
    "NODE_GPU_ALLOCATABLE",
    "QUEUE_ALLOCATED",
    "QUEUE_CAPABILITY",
    "QUEUE_DEMAND",
    "QUEUE_DESERVED",
    "QUEUE_LABEL",
    "QUEUE_PENDING",
    "QUEUE_USED",
    "RUNNING_GPU_PODS",
    "WORKLOAD",
    "fresh_pod_samples",
    "node_network_bps",
    "per_pod_max",
    "series_count",
    "volcano_queue_gpus",
    "volcano_queue_metric",
    "workload_frames",
]

GPU_RESOURCE = "nvidia.com/gpu"  # Volcano's resource name
KSM_GPU_RESOURCE = "nvidia_com_gpu"  # the same resource as kube-state-metrics sanitises it
QUEUE_LABEL = "queue_name"  # Volcano's queue label; the KSM fallbacks are relabelled to it


def volcano_queue_metric(field: str) -> str:
    """``volcano_queue_<field>_scalar_resources`` (field: allocated, request, deserved, capacity, …)."""
    return f"volcano_queue_{field}_scalar_resources"


def _volcano_gpus(field: str) -> Selector:
    return Selector.of(volcano_queue_metric(field), resource=GPU_RESOURCE)


def volcano_queue_gpus(field: str) -> str:
    """Volcano's per-queue GPU gauge ``field`` in GPUs: Volcano reports milli-units (1 GPU = 1000)."""
    return f"sum by ({QUEUE_LABEL}) ({_volcano_gpus(field)}) / 1000"


# GPU demand = allocated + pending. Volcano's queue "request" gauge is exactly that; where the Volcano
# metrics are absent, kube-state-metrics GPU requests of Running + Pending pods stand in, so clusters
# without the Volcano family can still be trained on and served.
KSM_GPU_REQUESTS = Selector.of("kube_pod_container_resource_requests", resource=KSM_GPU_RESOURCE)
_ACTIVE_PODS = Selector("kube_pod_status_phase").where("phase", "Running|Pending", "=~")
# `max by (namespace, pod)`: one right-hand series per pod even while an old phase series is still inside
# Prometheus' lookback (backfilled or federated data carry no staleness markers), else the join is
# many-to-many and Prometheus answers 422.
_KSM_DEMAND = f"({KSM_GPU_REQUESTS} * on(namespace, pod) group_left() max by (namespace, pod) ({_ACTIVE_PODS} == 1))"
_POD_QUEUE = "label_volcano_sh_queue_name"  # kube_pod_labels' name for the pod label volcano.sh/queue-name
# Only pods that name a queue: a GPU pod without the label would otherwise become a series with no queue.
_QUEUED_PODS = Selector("kube_pod_labels").where(_POD_QUEUE, "", "!=")

CLUSTER_DEMAND = f"sum({_volcano_gpus('request')}) / 1000 or sum({_KSM_DEMAND})"
# The fallback is summed by queue_name again so both sides carry the same label set: `or` then keeps the
# Volcano series and drops the kube-state-metrics one for the same queue (no duplicates).
QUEUE_DEMAND = (
    f"{volcano_queue_gpus('request')}"
    f" or sum by ({QUEUE_LABEL}) (label_replace(sum by ({_POD_QUEUE}) ("
    f"{_KSM_DEMAND} * on(namespace, pod) group_left({_POD_QUEUE}) {_QUEUED_PODS}),"
    f' "{QUEUE_LABEL}", "$1", "{_POD_QUEUE}", "(.*)"))'
)
QUEUE_ALLOCATED = volcano_queue_gpus("allocated")


def _ksm_by_queue(pods: str) -> str:
    """A per-pod GPU expression summed per queue (pod label → ``queue_name``), as QUEUE_DEMAND's fallback."""
    return (
        f"sum by ({QUEUE_LABEL}) (label_replace(sum by ({_POD_QUEUE}) ("
        f"{pods} * on(namespace, pod) group_left({_POD_QUEUE}) {_QUEUED_PODS}),"
        f' "{QUEUE_LABEL}", "$1", "{_POD_QUEUE}", "(.*)"))'
    )


# GPUs of the jobs waiting in each queue (the demand model's job input): Volcano's request − allocated, else
# kube-state-metrics Pending pods. A queue whose pods kube-state-metrics reports but none of them pending
# gets an explicit 0 (the last branch); a queue with no series at all is *unknown*, never 0.
_KSM_PENDING = (
    f"({KSM_GPU_REQUESTS} * on(namespace, pod) group_left() max by (namespace, pod) "
    f"({Selector('kube_pod_status_phase').where('phase', 'Pending')} == 1))"
)
QUEUE_PENDING = (
    f"{volcano_queue_gpus('request')} - {volcano_queue_gpus('allocated')}"
    f" or {_ksm_by_queue(_KSM_PENDING)} or 0 * {_ksm_by_queue(_KSM_DEMAND)}"
)
QUEUE_DESERVED = volcano_queue_gpus("deserved")
QUEUE_CAPABILITY = volcano_queue_gpus("capacity")  # Volcano calls the capability "capacity" in its metrics

# "Really used" GPUs: Σ DCGM utilisation / 100 over a queue's GPUs, joined to queues through the pod label
# where kube-state-metrics has it and the namespace otherwise. Both branches end in exactly {queue_name}:
# ``or`` keeps a right-hand series only when no left-hand one has the same label set, so any extra label
# would count a queue's usage twice.
_BUSY_GPUS = Selector("DCGM_FI_DEV_GPU_UTIL").where("namespace", "", "!=")
QUEUE_USED = (
    f"sum by ({QUEUE_LABEL}) (label_replace({_BUSY_GPUS}"
    f" * on(namespace, pod) group_left({_POD_QUEUE}) kube_pod_labels,"
    f' "{QUEUE_LABEL}", "$1", "{_POD_QUEUE}", "(.+)")) / 100'
    f" or sum by ({QUEUE_LABEL}) (label_replace({_BUSY_GPUS},"
    f' "{QUEUE_LABEL}", "$1", "namespace", "(.*)")) / 100'
)
CLUSTER_ALLOCATABLE = f"sum({Selector.of('kube_node_status_allocatable', resource=KSM_GPU_RESOURCE)})"

# The XDP part of the loop (``predictor.loop.xdp``): per-node network load and the job mix on each node.
NODE_GPU_ALLOCATABLE = f"sum by (node) ({Selector.of('kube_node_status_allocatable', resource=KSM_GPU_RESOURCE)})"
# One series per running GPU pod: its node, GPUs, Volcano job and queue (kube-state-metrics must export the
# pod labels volcano.sh/job-name and volcano.sh/queue-name: --metric-labels-allowlist, k8s/METRICS.md).
_POD_JOB = "label_volcano_sh_job_name"
_RUNNING = Selector("kube_pod_status_phase").where("phase", "Running")
RUNNING_GPU_PODS = (
    f"sum by (namespace, pod, node) ({KSM_GPU_REQUESTS.where('node', '', '!=')}"
    f" * on(namespace, pod) group_left() max by (namespace, pod) ({_RUNNING} == 1))"
    f" * on(namespace, pod) group_left({_POD_JOB}, {_POD_QUEUE})"
    f" max by (namespace, pod, {_POD_JOB}, {_POD_QUEUE}) (kube_pod_labels)"
)


def node_network_bps(
    direction: str, *, node_label: str = "node", exclude_devices: str = "lo", window_s: int = 3600
) -> str:
    """Bits per second per node and device over ``window_s`` (node_exporter; direction receive|transmit).

    ``exclude_devices`` is a regex of devices that never carry steered traffic (loopback, pod veths, ...).
    """
    if direction not in ("receive", "transmit"):
        raise ValueError(f"direction must be receive or transmit, not {direction!r}")
    counter = Selector(f"node_network_{direction}_bytes_total").where("device", exclude_devices, "!~")
    return f"sum by ({node_label}, device) (rate({counter}[{int(window_s)}s])) * 8"


CATALOGUE: Mapping[str, str] = MappingProxyType(
    {
        "cluster_demand": CLUSTER_DEMAND,
        "queue_demand": QUEUE_DEMAND,
        "queue_allocated": QUEUE_ALLOCATED,
        "queue_deserved": QUEUE_DESERVED,
        "queue_capability": QUEUE_CAPABILITY,
        "queue_used": QUEUE_USED,
        "queue_pending": QUEUE_PENDING,
        "cluster_allocatable": CLUSTER_ALLOCATABLE,
    }
)


# The workload the planner shapes targets with and measures fragmentation on (predictor.planner.workload_ksm):
# each query is one kube-state-metrics family, read as an instant (the newest sample). Pod labels,
# annotations and node labels need kube-state-metrics' --metric-{labels,annotations}-allowlist; where they
# are absent the parser falls back (a pod is its own gang, no selector, no recurring marks: unknown).
_ACTIVE = f"max by (namespace, pod, phase) ({_ACTIVE_PODS} == 1)"
# The join side holds one series per pod: a pod Pending then Running within the lookback has two phase
# series (pushed or federated data carry no staleness markers), and a join on them is many-to-many (422).
_ACTIVE_POD = f"max by (namespace, pod) ({_ACTIVE_PODS} == 1)"


def _renamed_value(expr: str, name: str) -> str:
    """``expr`` with its ``value`` label moved to ``name``: a label called ``value`` would collide with the
    sample column of the long frame every source returns."""
    return f'label_replace(label_replace({expr}, "{name}", "$1", "value", "(.*)"), "value", "", "value", ".*")'


WORKLOAD: Mapping[str, str] = MappingProxyType(
    {
        "pod_gpus": f"sum by (namespace, pod, node) ({KSM_GPU_REQUESTS})",
        "pod_phase": _ACTIVE,
        "pod_labels": f"kube_pod_labels * on(namespace, pod) group_left() {_ACTIVE_POD}",
        "pod_annotations": f"kube_pod_annotations * on(namespace, pod) group_left() {_ACTIVE_POD}",
        "pod_tolerations": _renamed_value(
            f"kube_pod_tolerations * on(namespace, pod) group_left() {_ACTIVE_POD}", "toleration_value"
        ),
        "pod_nodeselectors": f"kube_pod_nodeselectors * on(namespace, pod) group_left() {_ACTIVE_POD}",
        "node_gpus": str(Selector.of("kube_node_status_allocatable", resource=KSM_GPU_RESOURCE)),
        "node_taints": _renamed_value("kube_node_spec_taint", "taint_value"),
        "node_labels": "kube_node_labels",
        "node_unschedulable": "kube_node_spec_unschedulable == 1",
        "node_not_ready": str(Selector.of("kube_node_status_condition", condition="Ready", status="true")) + " == 0",
    }
)


def workload_frames(source: MetricSource, now: pd.Timestamp, step_s: float = 60.0) -> dict[str, pd.DataFrame]:
    """Every ``WORKLOAD`` family over one step before ``now`` (the parser keeps each series' newest sample)."""
    step = pd.Timedelta(seconds=step_s)
    return {name: source.query_range(query, now - step, now, step) for name, query in WORKLOAD.items()}


# Right-sizing's queries depend on the step and the metric, so they are builders rather than constants.
def fresh_pod_samples(metric: str, step_s: int) -> str:
    """Samples of ``metric`` on series with a pod, without the echo of a series that has ended.

    Prometheus repeats a series' last sample for up to 5 minutes after it ends (the lookback), which
    would stretch every run by a step; keeping only samples younger than one step removes the echo.
    """
    held = Selector(metric).where("pod", "", "!=")
    return f"{held} and (timestamp({held}) > time() - {int(step_s)})"


def per_pod_max(selector: Selector, window_s: int) -> str:
    """The largest value of each series over the trailing ``window_s`` (one value per pod per window)."""
    return f"max_over_time({selector}[{int(window_s)}s])"


def series_count(metric: str) -> str:
    """How many series of ``metric`` exist (to tell "absent" from "present but filtered out")."""
    return f"count({Selector(metric)})"
