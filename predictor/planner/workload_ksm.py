"""The workload from kube-state-metrics series, for loops that read the cluster through Prometheus only.

The loop's ServiceAccount may not list pods (``k8s/base/rbac.yaml``: demand comes from Prometheus), so the
gangs, tolerations and node taints come from kube-state-metrics: one instant per family of
``predictor.sources.queries.WORKLOAD``. KSM sanitises label names (``volcano.sh/queue-name`` becomes
``label_volcano_sh_queue_name``; a node selector ``gpu.vendor/type`` becomes ``nodeselector_gpu_vendor_type``
and the node label ``label_gpu_vendor_type``), so selectors and node labels are compared in that one
sanitised form. The ``value`` label of tolerations and taints arrives renamed (``toleration_value``,
``taint_value``) so it cannot collide with the sample column. Priority is not exported as a number: it is
``None`` (unknown), which the guarantee rule never lowers on. Pure: frames in, a ``Workload`` out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from models.frames import ID, TIME, VALUE
from predictor.errors import InputError
from predictor.planner.quantity import MAX_GPUS
from predictor.planner.workload import JobSummary, NodeSummary, Taint, Toleration, Workload, node_size

__all__ = ["workload_from_ksm"]

Pod = tuple[str, str]  # (namespace, pod)


def _latest(frames: Mapping[str, pd.DataFrame], name: str, *labels: str) -> pd.DataFrame:
    """The newest sample of every series of family ``name`` (empty when absent); ``labels`` must be there."""
    frame = frames.get(name)
    if frame is None or frame.empty:
        return pd.DataFrame(columns=[*labels, VALUE])
    missing = [c for c in labels if c not in frame.columns]
    if missing:
        raise InputError(f"kube-state-metrics {name}: series without label {missing[0]!r}")
    newest = frame.sort_values(TIME).groupby(ID, sort=False).tail(1)
    # Missing labels are "", the sample stays a number (a NaN sample filled with "" was a string downstream).
    return newest.fillna({c: "" for c in newest.columns if c != VALUE})


def _gpus(value: object, what: str) -> int:
    """A sample as whole GPUs. NaN, ±Inf or above ``MAX_GPUS`` is no GPU count: an error, which the loop takes
    as *workload unknown* (no floor) and ``predictor report`` prints as its one error line, rather than a
    capability floor of 1e300 or a ValueError traceback."""
    number = float(value)  # type: ignore[arg-type]
    if not math.isfinite(number) or not 0 <= number <= MAX_GPUS:
        raise InputError(f"kube-state-metrics: {what} has {number!r} GPUs, not a count within 0 … {MAX_GPUS:g}")
    return round(number)


def _by_pod(frame: pd.DataFrame, prefix: str) -> dict[Pod, dict[str, str]]:
    columns = [c for c in frame.columns if c.startswith(prefix)]
    return {
        (str(r["namespace"]), str(r["pod"])): {c[len(prefix) :]: str(r[c]) for c in columns if r[c] != ""}
        for r in frame.to_dict("records")
    }


def workload_from_ksm(frames: Mapping[str, pd.DataFrame], *, gpus_per_node: int | None = None) -> Workload | None:
    """Gangs (grouped by the PodGroup annotation, else the Volcano job label, else the pod) and GPU nodes.

    ``None`` without any pod GPU request: kube-state-metrics is absent (or the cluster idle); either way
    the gangs are unknown, not an empty cluster, so nothing is floored or measured on them.
    ``gpus_per_node``: by default the nodes' typical size (``node_size``).
    """
    if frames.get("pod_gpus") is None or frames["pod_gpus"].empty:
        return None
    gpus = _latest(frames, "pod_gpus", "namespace", "pod")
    phase = {
        (str(r["namespace"]), str(r["pod"])): str(r["phase"])
        for r in _latest(frames, "pod_phase", "namespace", "pod", "phase").to_dict("records")
    }
    labels = _by_pod(_latest(frames, "pod_labels", "namespace", "pod"), "label_")
    notes = _by_pod(_latest(frames, "pod_annotations", "namespace", "pod"), "annotation_")
    selectors = _by_pod(_latest(frames, "pod_nodeselectors", "namespace", "pod"), "nodeselector_")
    tolerations: dict[Pod, list[Toleration]] = {}
    for r in _latest(frames, "pod_tolerations", "namespace", "pod").to_dict("records"):
        tolerations.setdefault((str(r["namespace"]), str(r["pod"])), []).append(
            Toleration(
                str(r.get("key", "")),
                str(r.get("operator", "")) or "Equal",
                str(r.get("toleration_value", "")),
                str(r.get("effect", "")),
            )
        )
    used: dict[str, int] = {}
    groups: dict[tuple[str, str], list[tuple[Pod, int, str]]] = {}
    for r in gpus.to_dict("records"):
        pod = (str(r["namespace"]), str(r["pod"]))
        if pod not in phase:
            continue  # finished
        count, node = _gpus(r[VALUE], f"pod {pod[0]}/{pod[1]}"), str(r.get("node", ""))
        if count <= 0:
            continue  # no GPUs
        if phase[pod] == "Running" and node:
            used[node] = used.get(node, 0) + count
        queue = labels.get(pod, {}).get("volcano_sh_queue_name")
        if not queue:
            continue
        group = (
            notes.get(pod, {}).get("scheduling_k8s_io_group_name")
            or labels.get(pod, {}).get("volcano_sh_job_name")
            or pod[1]
        )
        groups.setdefault((queue, f"{pod[0]}/{group}"), []).append((pod, count, node))
    jobs = []
    for (queue, name), members in sorted(groups.items()):
        first = members[0][0]
        running = [node for pod, _, node in members if phase[pod] == "Running" and node]
        jobs.append(
            JobSummary(
                queue=queue,
                name=name,
                pods=len(members),
                gpus_per_pod=max(c for _, c, _ in members),
                phase="running" if running else "pending",
                recurring=notes.get(first, {}).get("gpu_capacity_predictor_recurring", "").lower() == "true",
                priority=None,
                tolerations=tuple(tolerations.get(first, [])),
                node_selector=tuple(sorted(selectors.get(first, {}).items())),
                nodes=tuple(running),
            )
        )
    nodes = _nodes(frames, used)
    return Workload(tuple(jobs), nodes, gpus_per_node or node_size(nodes))


def _nodes(frames: Mapping[str, pd.DataFrame], used: Mapping[str, int]) -> tuple[NodeSummary, ...]:
    off = {str(n) for name in ("node_unschedulable", "node_not_ready") for n in _latest(frames, name, "node")["node"]}
    taints: dict[str, list[Taint]] = {}
    for r in _latest(frames, "node_taints", "node").to_dict("records"):
        taints.setdefault(str(r["node"]), []).append(
            Taint(str(r.get("key", "")), str(r.get("taint_value", "")), str(r.get("effect", "")))
        )
    label_frame = _latest(frames, "node_labels", "node")
    node_labels = {
        str(r["node"]): tuple(
            sorted(
                (c[len("label_") :], str(r[c])) for c in label_frame.columns if c.startswith("label_") and r[c] != ""
            )
        )
        for r in label_frame.to_dict("records")
    }
    out = []
    for r in _latest(frames, "node_gpus", "node").sort_values("node").to_dict("records"):
        name = str(r["node"])
        gpus = 0 if name in off else _gpus(r[VALUE], f"node {name}")
        out.append(
            NodeSummary(
                name, gpus, min(used.get(name, 0), gpus), node_labels.get(name, ()), tuple(taints.get(name, []))
            )
        )
    return tuple(out)
