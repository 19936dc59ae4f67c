"""The jobs of a live cluster's history, rebuilt from kube-state-metrics pods, for the report's what-if replay.

A job is a Volcano job (pods sharing the pod label ``volcano.sh/job-name``) or a lone pod. Its queue is the pod
label ``volcano.sh/queue-name`` (the namespace without it), its GPUs the sum of its pods' ``nvidia_com_gpu``
requests, its submit time the pods' ``kube_pod_created`` (else the first sample a pod was Pending or Running)
and its run time the longest time one of its pods was Running (phase samples at the query step; a pod
restarted by a reclaim counts its attempts, so the replay's work is never less than what really ran). Pods
that never ran in the history have no run time: they are left out, and the report says how many; a pod that
lives between two samples of the query step (5 minutes) is not seen at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from models.frames import TIME, VALUE
from predictor.errors import DataSourceError, InputError
from predictor.sim import normalise_jobs
from predictor.sources import MetricSource, queries

__all__ = ["PodJobs", "jobs_from_pods"]

_GPU = f'resource="{queries.KSM_GPU_RESOURCE}"'
_QUEUE, _JOB = "label_volcano_sh_queue_name", "label_volcano_sh_job_name"
PHASES = 'max by (namespace, pod, phase) (kube_pod_status_phase{phase=~"Pending|Running"} == 1)'
REQUESTS = f"sum by (namespace, pod) (kube_pod_container_resource_requests{{{_GPU}}})"
LABELS = f"max by (namespace, pod, {_QUEUE}, {_JOB}) (kube_pod_labels)"
CREATED = "max by (namespace, pod) (kube_pod_created)"


@dataclass
class PodJobs:
    """The rebuilt job table (``predictor.sim`` schema), or ``None`` and why it could not be rebuilt."""

    jobs: pd.DataFrame | None
    why: str = ""
    left_out: int = 0  # GPU pods that never ran in the history (no run time to replay)
    running: int = 0  # jobs still running at the end (their run time so far is a lower bound)


def _per_pod(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(namespace=frame["namespace"].astype(str), pod=frame["pod"].astype(str))


def jobs_from_pods(source: MetricSource, start: pd.Timestamp, end: pd.Timestamp, step_s: int = 300) -> PodJobs:
    """The GPU jobs seen between ``start`` and ``end``; ``PodJobs(None, why)`` when the series are missing."""
    step = pd.Timedelta(seconds=step_s)
    try:
        phases = source.query_range(PHASES, start, end, step)
        if phases.empty:
            return PodJobs(None, "no pod lifecycle series (kube_pod_status_phase) in the window")
        requests = source.query_range(REQUESTS, start, end, step)
        if requests.empty:
            return PodJobs(None, f"no pod GPU requests (kube_pod_container_resource_requests {_GPU}) in the window")
        labels = source.query_range(LABELS, start, end, step)
        created = source.query_range(CREATED, start, end, step)
    except (DataSourceError, InputError) as exc:
        return PodJobs(None, f"pod series unreadable: {exc}".splitlines()[0])
    gpus = _per_pod(requests).groupby(["namespace", "pod"])[VALUE].max().rename("gpus")
    gpus = gpus[gpus > 0]
    phases = _per_pod(phases)
    seen = phases.groupby(["namespace", "pod"])[TIME].min().rename("seen")
    running = phases[phases["phase"].astype(str) == "Running"]
    ran = running.groupby(["namespace", "pod"])[TIME].agg(["min", "max", "count"])
    pods = gpus.to_frame().join(seen, how="inner").join(ran, how="left")
    if not created.empty:
        first = _per_pod(created).groupby(["namespace", "pod"])[VALUE].min()
        pods = pods.join(pd.to_datetime(first, unit="s", utc=True).rename("created"), how="left")
        pods["seen"] = pods["created"].where(pods["created"].notna() & (pods["created"] < pods["seen"]), pods["seen"])
    if not labels.empty:
        names = _per_pod(labels).reindex(columns=["namespace", "pod", _QUEUE, _JOB]).fillna("")
        pods = pods.join(names.groupby(["namespace", "pod"])[[_QUEUE, _JOB]].max(), how="left")
    pods = pods.reindex(columns=[*pods.columns, *(c for c in (_QUEUE, _JOB) if c not in pods.columns)]).fillna(
        {_QUEUE: "", _JOB: ""}
    )
    pods = pods.reset_index()
    never = pods["count"].isna()
    left_out = int(never.sum())
    pods = pods[~never]
    if pods.empty:
        return PodJobs(None, f"none of the {left_out} GPU pods in the window ever ran", left_out=left_out)
    pods = pods.assign(
        queue=pods[_QUEUE].astype(str).where(pods[_QUEUE].astype(str) != "", pods["namespace"]),
        job=pods["namespace"] + "/" + pods[_JOB].astype(str).where(pods[_JOB].astype(str) != "", pods["pod"]),
        run_s=pods["count"] * step_s,
        open=pods["max"] >= end - step,
    )
    jobs = pods.groupby("job", sort=True).agg(
        submit_time=("seen", "min"), queue=("queue", "first"), num_gpus=("gpus", "sum"), duration_s=("run_s", "max")
    )
    still = int(pods.groupby("job")["open"].any().sum())
    table = normalise_jobs(jobs.reset_index().rename(columns={"job": "job_id"}), source="kube-state-metrics pods")
    return PodJobs(table, left_out=left_out, running=still)
