"""Per-pod and per-run usage tables from long metric frames (DCGM joined to kube-state-metrics).

Right-sizing needs, for every run of a workload, what it asked for next to what it really used. Neither
exists as one series: DCGM reports per GPU (with the pod that holds it as labels), kube-state-metrics
reports the request per container and the pod's Volcano labels. This module joins them on
``namespace``/``pod`` and reduces samples to one row per run. It is pure pandas on frames in the
project's long shape, so a Prometheus answer, a history file and the simulator's Parquet all go through
the same code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from models.frames import TIME, VALUE
from predictor.errors import InputError

__all__ = [
    "FB_USED",
    "GPU_UTIL",
    "POD_LABELS",
    "POWER",
    "REQUESTS",
    "RUN_COLUMNS",
    "FeatureSettings",
    "gpu_memory_mib",
    "runs_from_frames",
    "workload_of_job",
    "workload_of_pod",
]

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
POWER = "DCGM_FI_DEV_POWER_USAGE"
REQUESTS = "kube_pod_container_resource_requests"
POD_LABELS = "kube_pod_labels"
QUEUE_LABEL = "label_volcano_sh_queue_name"
JOB_LABEL = "label_volcano_sh_job_name"
# Labels that name a workload outright, most explicit first (kube-state-metrics' label_ prefix).
WORKLOAD_LABELS = ("label_workload", "label_app_kubernetes_io_name", "label_app")

RUN_COLUMNS = (
    "namespace",
    "workload",
    "run",
    "job",
    "queue",
    "gpu_type",
    "pods",
    "start",
    "end",
    "runtime_h",
    "gpu_request",
    "gpus_used_p95",
    "gpus_used_max",
    "gpu_equiv_p95",
    "util_mean",
    "util_p95",
    "mem_peak_mib",
    "mem_p99_mib",
    "gpu_mem_total_mib",
    "early_gpus_used",
    "early_gpu_equiv",
    "early_mem_peak_mib",
    "early_util_mean",
    "samples",
    "power_mean_w",
    "energy_kwh",
)

# Generated suffixes, most specific first: a Deployment's ReplicaSet hash + pod hash, a Job's or
# ReplicaSet's 5-character hash, a StatefulSet or Volcano task index, then a Volcano task name.
_SUFFIXES = (
    re.compile(r"-[a-z0-9]{8,10}-[a-z0-9]{5}$"),
    re.compile(r"-[a-z0-9]{5}$"),
    re.compile(r"-\d+$"),
)
# Run identifiers appended to a recurring job's name: a number (run counter, epoch seconds), a date or
# timestamp, a short hex or alphanumeric hash with a digit in it. Stripped repeatedly from the right.
_RUN_ID = re.compile(r"[-_.](\d+|\d{4}-?\d{2}-?\d{2}(t?\d{4,6}z?)?|(?=[a-z0-9]*\d)[a-z0-9]{5,12})$")
_VOLCANO_TASK = re.compile(r"-(worker|master|ps|chief|launcher|evaluator|driver|executor)$")
_GIB_IN_NAME = re.compile(r"(\d+)\s*GB", re.IGNORECASE)


@dataclass(frozen=True)
class FeatureSettings:
    """How samples become a run: what counts as a busy GPU and how long the 'first minutes' are."""

    busy_threshold_pct: float = 5.0
    early_minutes: float = 30.0


def workload_of_pod(pod: str) -> str:
    """A pod name with its generated suffix removed (``train-7d9f8c6b5-x2k4q`` → ``train``).

    A 5-character suffix is only stripped when it contains a digit: ``-model`` is part of a name,
    ``-x2k4q`` is a hash.
    """
    name = pod
    for pattern in _SUFFIXES:
        match = pattern.search(name)
        if match and (pattern.pattern != r"-[a-z0-9]{5}$" or any(c.isdigit() for c in match.group())):
            name = name[: match.start()]
            break
    name = _VOLCANO_TASK.sub("", name)
    return name or pod


def workload_of_job(job: str) -> str:
    """A Volcano job (or PodGroup) name without its run identifiers: ``bert-ft-20260302-1a2b3c`` → ``bert-ft``.

    Recurring jobs (nightly retraining, sweeps, CI) are submitted under fresh names with a counter, a date
    or a hash appended; the stem is what stays the same from run to run, so it is the workload.
    """
    name = job.strip().lower()
    while True:
        match = _RUN_ID.search(name)
        if not match or match.start() == 0:
            return name or job
        name = name[: match.start()]


def gpu_memory_mib(model_name: str) -> float:
    """GPU memory from DCGM's ``modelName`` ("NVIDIA H100 80GB HBM3" → 81920); NaN when it does not say."""
    match = _GIB_IN_NAME.search(model_name or "")
    return float(int(match.group(1)) * 1024) if match else float("nan")


def _gpu_type(model_name: str) -> str:
    for token in ("H200", "H100", "H20", "A100", "A800", "A10", "L40S", "L40", "L4", "V100", "T4"):
        if token in (model_name or ""):
            return token
    return model_name or "unknown"


def _labelled(frame: pd.DataFrame, name: str, needed: tuple[str, ...]) -> pd.DataFrame:
    """Rows of one metric with the label columns it must have, naming what is missing."""
    if "__name__" in frame.columns:
        frame = frame[frame["__name__"] == name]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise InputError(f"{name}: series have no {', '.join(repr(m) for m in missing)} label")
    return frame


def _dcgm_samples(util: pd.DataFrame, fb: pd.DataFrame, power: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (GPU, timestamp) held by a pod: namespace, pod, gpu key, model, util, fb MiB, power W."""
    util = _labelled(util, GPU_UTIL, ("namespace", "pod"))
    # Old dcgm-exporter versions say ``uuid``; without either, host + index identifies a GPU.
    host = next((c for c in ("Hostname", "hostname") if c in util.columns), None)
    key_cols = [c for c in ("UUID", "uuid") if c in util.columns][:1] or [c for c in (host, "gpu") if c]
    held = util[util["pod"].fillna("").astype(str) != ""]
    if held.empty:
        raise InputError(f"{GPU_UTIL}: no sample has a non-empty 'pod' label (no GPU was held by a pod)")
    keep = ["namespace", "pod", *key_cols, TIME]
    model = "modelName" if "modelName" in held.columns else None
    samples = held[[*keep, VALUE, *([model] if model else [])]].rename(columns={VALUE: "util"})
    samples["gpu_key"] = (
        samples[key_cols].astype(str).agg("/".join, axis=1) if len(key_cols) > 1 else samples[key_cols[0]].astype(str)
    )
    samples["model_name"] = samples[model].astype(str) if model else ""
    samples = samples.drop(columns=[c for c in [*key_cols, *([model] if model else [])] if c != "gpu_key"])
    for frame, name, column in ((fb, FB_USED, "fb_mib"), (power, POWER, "power_w")):
        if frame is None or frame.empty:
            samples[column] = np.nan
            continue
        frame = _labelled(frame, name, ("namespace", "pod"))
        keyed = frame[frame["pod"].fillna("").astype(str) != ""]
        keyed = keyed.assign(
            gpu_key=keyed[key_cols].astype(str).agg("/".join, axis=1)
            if len(key_cols) > 1
            else keyed[key_cols[0]].astype(str)
        )[["namespace", "pod", "gpu_key", TIME, VALUE]].rename(columns={VALUE: column})
        samples = samples.merge(keyed, on=["namespace", "pod", "gpu_key", TIME], how="left")
        # A negative or infinite reading is no reading (a Parquet directory is not value-checked): unknown,
        # so it cannot turn a queue's energy negative in the report.
        values = pd.to_numeric(samples[column], errors="coerce")
        samples[column] = values.where(np.isfinite(values) & (values >= 0))
    for column in ("namespace", "pod"):
        samples[column] = samples[column].astype(str)
    return samples


def _pod_meta(requests: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
    """Per pod: GPUs requested (sum over containers of the largest value seen), queue and Volcano job."""
    req = _labelled(requests, REQUESTS, ("namespace", "pod"))
    if "resource" in req.columns:
        req = req[req["resource"] == "nvidia_com_gpu"]
    container = req["container"].fillna("") if "container" in req.columns else ""
    req = req.assign(container=container)
    per_container = req.groupby(["namespace", "pod", "container"], sort=False)[VALUE].max()
    meta = per_container.groupby(level=["namespace", "pod"]).sum().rename("gpu_request").reset_index()
    if not labels.empty:
        lab = _labelled(labels, POD_LABELS, ("namespace", "pod"))
        cols = [c for c in (QUEUE_LABEL, JOB_LABEL, *WORKLOAD_LABELS) if c in lab.columns]
        if cols:
            last = lab.sort_values(TIME).groupby(["namespace", "pod"], sort=False)[cols].last().reset_index()
            meta = meta.merge(last, on=["namespace", "pod"], how="outer")
    for column in ("namespace", "pod"):
        meta[column] = meta[column].astype(str)
    return meta


def _assign_runs(pods: pd.DataFrame, gap: pd.Timedelta) -> pd.Series:
    """Run number per pod: pods of one Volcano job (or, without one, a workload's pods that overlap in
    time within ``gap``) are one run; runs are numbered in start order per workload."""
    run = pd.Series(0, index=pods.index, dtype="int64")
    for _, group in pods.sort_values("first").groupby(["namespace", "workload"], sort=False):
        number, reach, key = -1, None, None
        for idx, first, last, job in zip(group.index, group["first"], group["last"], group["run_key"], strict=True):
            if reach is None or first > reach + gap or job != key:
                number += 1
                reach = last
            else:
                reach = max(reach, last)
            key = job
            run[idx] = number
    return run


def _workload_identity(pods: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(workload, run key) per pod from labels, the Volcano job name and the pod name, in that order."""

    def present(column: str) -> np.ndarray:
        if column not in pods.columns:
            return np.full(len(pods), None, dtype=object)
        values = pods[column].astype(object).to_numpy()
        return np.array([v if isinstance(v, str) and v else None for v in values], dtype=object)

    by_pod = pods["pod"].map(workload_of_pod).to_numpy(dtype=object)
    job = present(JOB_LABEL)
    # Without a job label the pod's own name (suffix removed) is the run, and its stem the workload.
    workload = np.array([workload_of_job(j or p) for j, p in zip(job, by_pod, strict=True)], dtype=object)
    for label in reversed(WORKLOAD_LABELS):  # the most explicit label wins
        named = present(label)
        workload = np.where(named != None, named, workload)  # noqa: E711 (element-wise)
    run_key = np.where(job != None, job, by_pod)  # noqa: E711
    return pd.Series(workload, index=pods.index, dtype=str), pd.Series(run_key, index=pods.index, dtype=str)


def runs_from_frames(
    util: pd.DataFrame,
    fb: pd.DataFrame,
    requests: pd.DataFrame,
    labels: pd.DataFrame,
    step: pd.Timedelta,
    settings: FeatureSettings = FeatureSettings(),
    power: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per workload run (``RUN_COLUMNS``) from DCGM util/FB, GPU requests and pod labels.

    A workload is what stays the same between runs: a ``workload``/``app.kubernetes.io/name``/``app``
    pod label when there is one, else the stem of the Volcano job name (``volcano.sh/job-name``, run ids
    stripped by ``workload_of_job``), else the pod name without its generated suffix. A run is one
    Volcano job. The queue is ``volcano.sh/queue-name`` or, without it, the namespace. With DCGM power
    (optional) each run also has its mean power per GPU and its energy (NaN without).
    """
    samples = _dcgm_samples(util, fb, power)
    meta = _pod_meta(requests, labels) if not requests.empty else pd.DataFrame(columns=["namespace", "pod"])
    span = samples.groupby(["namespace", "pod"], sort=False)[TIME].agg(first="min", last="max").reset_index()
    pods = span.merge(meta, on=["namespace", "pod"], how="left")
    pods["workload"], pods["run_key"] = _workload_identity(pods)
    queue = pods[QUEUE_LABEL] if QUEUE_LABEL in pods.columns else pd.Series(np.nan, index=pods.index)
    pods["queue"] = queue.where(queue.notna() & (queue.astype(str) != ""), pods["namespace"])
    pods["run"] = _assign_runs(pods, step)
    samples = samples.merge(
        pods[["namespace", "pod", "workload", "queue", "run", "run_key", "gpu_request"]],
        on=["namespace", "pod"],
        how="left",
    )
    keys = ["namespace", "workload", "run"]
    samples["busy"] = samples["util"] > settings.busy_threshold_pct
    samples["equiv"] = samples["util"] / 100.0  # GPU-equivalents: what a sharing setup could pack
    start = samples.groupby(keys, sort=False)[TIME].transform("min")
    samples["early"] = samples[TIME] < start + pd.Timedelta(minutes=settings.early_minutes)
    per_time = samples.groupby([*keys, TIME], sort=False).agg(
        busy=("busy", "sum"), equiv=("equiv", "sum"), early=("early", "first")
    )
    per_time = per_time.reset_index()
    g = samples.groupby(keys, sort=False)
    runs = g.agg(
        queue=("queue", "first"),
        job=("run_key", "first"),
        start=(TIME, "min"),
        end=(TIME, "max"),
        samples=("util", "size"),
        util_mean=("util", "mean"),
        mem_peak_mib=("fb_mib", "max"),
        model_name=("model_name", lambda s: s.mode().iat[0] if len(s) else ""),
        pods=("pod", "nunique"),
        gpus_seen=("gpu_key", "nunique"),
    )
    runs["util_p95"] = g["util"].quantile(0.95)
    runs["power_mean_w"] = g["power_w"].mean()
    runs["energy_kwh"] = g["power_w"].sum(min_count=1) * step.total_seconds() / 3.6e6
    runs["mem_p99_mib"] = g["fb_mib"].quantile(0.99)
    t = per_time.groupby(keys, sort=False)["busy"]
    runs["gpus_used_p95"] = t.quantile(0.95)
    runs["gpus_used_max"] = t.max().astype(float)
    runs["gpu_equiv_p95"] = per_time.groupby(keys, sort=False)["equiv"].quantile(0.95)
    early = samples[samples["early"]].groupby(keys, sort=False)
    runs["early_mem_peak_mib"] = early["fb_mib"].max()
    runs["early_util_mean"] = early["util"].mean()
    early_t = per_time[per_time["early"]].groupby(keys, sort=False)
    runs["early_gpus_used"] = early_t["busy"].max().astype(float)
    runs["early_gpu_equiv"] = early_t["equiv"].max()
    request = pods.groupby(["namespace", "workload", "run"], sort=False)["gpu_request"].sum(min_count=1)
    runs = runs.join(request)
    # A pod with no request series (not scraped, or not a GPU request) is taken at the GPUs it held.
    runs["gpu_request"] = runs["gpu_request"].fillna(runs["gpus_seen"]).astype(float)
    runs["runtime_h"] = (runs["end"] - runs["start"] + step).dt.total_seconds() / 3600  # type: ignore[attr-defined]
    runs["gpu_type"] = runs["model_name"].map(_gpu_type)
    runs["gpu_mem_total_mib"] = runs["model_name"].map(gpu_memory_mib)
    runs = runs.reset_index()
    return runs[list(RUN_COLUMNS)].sort_values(["start", "namespace", "workload"], kind="stable").reset_index(drop=True)
