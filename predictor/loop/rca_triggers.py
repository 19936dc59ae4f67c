"""When the loop diagnoses a root cause: something left the band it is expected to stay in.

Three triggers, each read from what the loop already has or reads from Prometheus each cycle:

- ``demand_band``: a queue's newest demand (the loop's history) lies outside the served forecast's interval
  for the step in force (``predictor.diagnose.bands.step_at``, the step the band gauges and the
  ``PredictorQueueDemandAnomaly`` alerts compare with);
- ``gpu_util_band``: a job's mean GPU utilisation over the window moved out of the band of its own
  preceding window (mean ± 3 standard deviations, never narrower than ``UTIL_BAND_MIN_PCT``), so a
  steady job that stalls triggers and a job that always swings does not;
- ``job_restart``: a container of a job restarted in the window (kube-state-metrics' restart counter) or
  Volcano retried the job (its scheduler's retry counter).

A job is named as the features name it (the pod's ``volcano.sh/job-name`` label, else the pod name without
its replica suffix), and its queue comes from the pod's ``volcano.sh/queue-name`` label where known.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from models.frames import ID, TIME, VALUE
from predictor.diagnose.bands import step_at

__all__ = [
    "TRIGGERS",
    "TRIGGER_METRICS",
    "Trigger",
    "demand_triggers",
    "pod_owners",
    "restart_triggers",
    "util_triggers",
]

TRIGGERS = ("demand_band", "gpu_util_band", "job_restart")
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
RESTARTS = "kube_pod_container_status_restarts_total"
RETRIES = "volcano_job_retry_counts"  # Volcano scheduler: retries per job, labelled job_id (namespace/name)
POD_LABELS = "kube_pod_labels"
# What the job triggers read each cycle (a diagnosis reads the rest of the model's families only when fired).
TRIGGER_METRICS = (GPU_UTIL, RESTARTS, RETRIES, POD_LABELS)
JOB_LABEL, QUEUE_LABEL = "label_volcano_sh_job_name", "label_volcano_sh_queue_name"
UTIL_BAND_MIN_PCT = 15.0  # a steady job's spread is ~0: a band narrower than this would fire on noise
UTIL_BAND_SIGMAS = 3.0  # a job that always swings has a wide band: its swings are not a change
MIN_SAMPLES = 3  # per window: fewer cannot tell a band from a blip
# The features' rule for a pod without a job label: the pod name without its replica suffix.
_REPLICA = re.compile(r"(-(worker|master|launcher|ps|chief|task))?-\d+$")


@dataclass(frozen=True)
class Trigger:
    """Why a window is diagnosed: the trigger kind, the queue or job it is about, its queue ("" unknown)."""

    kind: str
    subject: str
    queue: str
    reason: str


def _rows(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    if frame.empty or "__name__" not in frame.columns:
        return frame.iloc[0:0]
    return frame[frame["__name__"] == name]


def _label(rows: pd.DataFrame, name: str) -> list[str]:
    if name not in rows.columns:
        return [""] * len(rows)
    return [str(v) if isinstance(v, str) else "" for v in rows[name]]


def pod_owners(frame: pd.DataFrame) -> dict[tuple[str, str], tuple[str, str]]:
    """``(namespace, pod)`` → ``(job, queue)`` from the pods' labels in the window."""
    rows = _rows(frame, POD_LABELS)
    keys = zip(_label(rows, "namespace"), _label(rows, "pod"), strict=True)
    owners = zip(_label(rows, JOB_LABEL), _label(rows, QUEUE_LABEL), strict=True)
    return {key: owner for key, owner in zip(keys, owners, strict=True) if key[1]}


def _owner(owners: dict[tuple[str, str], tuple[str, str]], namespace: str, pod: str) -> tuple[str, str]:
    job, queue = owners.get((namespace, pod), ("", ""))
    return (job or _REPLICA.sub("", pod)), queue


def demand_triggers(
    history: pd.DataFrame | None, forecast: pd.DataFrame | None, now: pd.Timestamp, *, level: int = 80
) -> list[Trigger]:
    """Queues whose newest demand at or before ``now`` is outside the forecast's ``level`` % interval."""
    lo, hi = f"lo-{level}", f"hi-{level}"
    if history is None or history.empty or forecast is None or forecast.empty:
        return []
    if not {ID, TIME, lo, hi} <= set(forecast.columns):
        return []
    current = step_at(forecast, now).drop_duplicates(ID)
    band = {str(q): (float(a), float(b)) for q, a, b in zip(current[ID], current[lo], current[hi], strict=True)}
    stamps = pd.to_datetime(history[TIME], utc=True)
    latest = history[stamps <= now].assign(**{TIME: stamps}).sort_values(TIME).groupby(ID).tail(1)
    out = []
    for queue, value in zip(latest[ID].astype(str), latest[VALUE].astype(float), strict=True):
        if queue not in band or not math.isfinite(value):
            continue
        low, high = band[queue]
        if math.isfinite(low) and math.isfinite(high) and not low <= value <= high:
            why = f"queue {queue} demand {value:g} GPUs outside its forecast band [{low:.4g}, {high:.4g}]"
            out.append(Trigger("demand_band", queue, queue, why))
    return out


def util_triggers(frame: pd.DataFrame, now: pd.Timestamp, window: pd.Timedelta) -> list[Trigger]:
    """Jobs whose mean GPU utilisation in ``(now - window, now]`` left the band of the window before."""
    rows = _rows(frame, GPU_UTIL)
    pods = _label(rows, "pod")
    if rows.empty or not any(pods):
        return []
    owners = pod_owners(frame)
    named = [
        _owner(owners, ns, pod) if pod else ("", "") for ns, pod in zip(_label(rows, "namespace"), pods, strict=True)
    ]
    per_step = (
        rows.assign(job=[j for j, _ in named], queue=[q for _, q in named], t=pd.to_datetime(rows[TIME], utc=True))
        .loc[lambda f: (f["job"] != "") & (f["t"] > now - 2 * window) & (f["t"] <= now)]
        .groupby(["job", "queue", "t"])[VALUE]
        .mean()
        .reset_index()
    )
    out = []
    for (job, queue), steps in per_step.groupby(["job", "queue"], sort=True):
        before = steps.loc[steps["t"] <= now - window, VALUE].to_numpy(dtype=np.float64)
        during = steps.loc[steps["t"] > now - window, VALUE].to_numpy(dtype=np.float64)
        if len(before) < MIN_SAMPLES or len(during) < MIN_SAMPLES:
            continue  # a job that just started or ended has no band of its own yet
        mid = float(np.mean(before))
        width = max(UTIL_BAND_SIGMAS * float(np.std(before)), UTIL_BAND_MIN_PCT)
        level = float(np.mean(during))
        if abs(level - mid) > width:
            why = f"job {job} GPU utilisation {level:.0f} % outside its band [{mid - width:.0f}, {mid + width:.0f}] %"
            out.append(Trigger("gpu_util_band", str(job), str(queue), why))
    return out


def _increase(values: np.ndarray) -> float:
    """A counter's increase over consecutive samples, a reset (a drop) counting as a restart from zero."""
    steps = np.diff(values)
    return float(np.where(steps >= 0, steps, values[1:]).sum())


def restart_triggers(frame: pd.DataFrame, now: pd.Timestamp, window: pd.Timedelta) -> list[Trigger]:
    """Jobs with a container restart or a Volcano retry in ``(now - window, now]`` (one trigger per job)."""
    owners = pod_owners(frame)
    found: dict[tuple[str, str], float] = {}
    for name in (RESTARTS, RETRIES):
        rows = _rows(frame, name)
        if rows.empty:
            continue
        rows = rows.assign(t=pd.to_datetime(rows[TIME], utc=True)).sort_values([ID, "t"])
        for _, series in rows.groupby(ID, sort=False):
            before = series[series["t"] <= now - window].tail(1)
            values = pd.concat([before, series[(series["t"] > now - window) & (series["t"] <= now)]])
            if len(values) < 2:
                continue
            increase = _increase(values[VALUE].to_numpy(dtype=np.float64))
            if increase <= 0:
                continue
            first = values.iloc[0]
            if name == RETRIES:
                job_id = str(first.get("job_id") or "")
                key = (job_id.rsplit("/", 1)[-1], "")
            else:
                key = _owner(owners, str(first.get("namespace") or ""), str(first.get("pod") or ""))
            if key[0]:
                found[key] = found.get(key, 0.0) + increase
    return [
        Trigger("job_restart", job, queue, f"job {job} restarted {n:g} time(s) in the window")
        for (job, queue), n in sorted(found.items())
    ]
