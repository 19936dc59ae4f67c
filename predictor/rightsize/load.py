"""Where right-sizing reads its four inputs: a Prometheus range, a history file, or the simulator's output.

Right-sizing needs DCGM utilisation (and framebuffer) per GPU *with the pod labels* dcgm-exporter adds in
Kubernetes mode, kube-state-metrics GPU requests, and — optionally — pod labels for the Volcano queue
and job. A cluster often lacks one of them (exporter not in Kubernetes mode, KSM without the label
allow-list), and a silent empty table would read as "nothing to right-size". So each missing piece is
named here, with the series and label it expected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from models.frames import TIME, VALUE, empty_history
from predictor.errors import DataSourceError, InputError
from predictor.rightsize.elastic import idle_quota
from predictor.rightsize.features import (
    FB_USED,
    GPU_UTIL,
    JOB_LABEL,
    POD_LABELS,
    POWER,
    QUEUE_LABEL,
    REQUESTS,
    FeatureSettings,
    runs_from_frames,
)
from predictor.rightsize.recommend import RightsizeSettings, recommend
from predictor.sources import MetricSource, Selector, read_metrics
from predictor.sources.files import read_history
from predictor.sources.queries import (
    GPU_RESOURCE,
    KSM_GPU_REQUESTS,
    fresh_pod_samples,
    per_pod_max,
    series_count,
    volcano_queue_gpus,
    volcano_queue_metric,
)

__all__ = ["RightsizeInput", "from_frame", "from_history", "from_source", "rightsize"]

DESERVED = volcano_queue_metric("deserved")
ALLOCATED = volcano_queue_metric("allocated")


@dataclass
class RightsizeInput:
    """The four long frames right-sizing joins, plus notes on what was missing but optional."""

    util: pd.DataFrame
    fb: pd.DataFrame
    requests: pd.DataFrame
    labels: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    power: pd.DataFrame = field(default_factory=empty_history)  # optional: energy advice only
    # optional, Volcano's per-queue gauges in GPUs: the idle quota growth advice needs
    deserved: pd.DataFrame = field(default_factory=empty_history)
    allocated: pd.DataFrame = field(default_factory=empty_history)


def _check(inputs: RightsizeInput, where: str) -> RightsizeInput:
    if inputs.util.empty:
        raise DataSourceError(f"{where}: no {GPU_UTIL} series (is dcgm-exporter scraped?)")
    if "pod" not in inputs.util.columns or (inputs.util["pod"].fillna("").astype(str) == "").all():
        raise DataSourceError(
            f"{where}: {GPU_UTIL} has no 'pod' label on any series: run dcgm-exporter in Kubernetes mode "
            "(DCGM_EXPORTER_KUBERNETES=true) so GPUs are labelled with namespace/pod/container"
        )
    if inputs.requests.empty:
        raise DataSourceError(f"{where}: no {KSM_GPU_REQUESTS} series (is kube-state-metrics scraped?)")
    if inputs.fb.empty:
        inputs.notes.append(f"no {FB_USED} series: GPU memory is not recommended")
    if inputs.power.empty:
        inputs.notes.append(f"no {POWER} series: no power-cap or energy advice")
    if inputs.deserved.empty or inputs.allocated.empty:
        inputs.notes.append(f"no {DESERVED} or {ALLOCATED} series: no queue idle quota, so no growth advice")
    if inputs.labels.empty or QUEUE_LABEL not in inputs.labels.columns:
        inputs.notes.append(
            f"no {POD_LABELS}{{{QUEUE_LABEL}}}: queues are taken from namespaces (allow-list the pod label "
            "volcano.sh/queue-name in kube-state-metrics' --metric-labels-allowlist)"
        )
    if not inputs.labels.empty and JOB_LABEL not in inputs.labels.columns:
        inputs.notes.append(f"no {POD_LABELS}{{{JOB_LABEL}}}: workloads are pod names without their suffix")
    return inputs


def from_source(source: MetricSource, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta) -> RightsizeInput:
    """Query the four inputs over ``[start, end]``; server-side filters keep idle GPUs out of the answer."""
    step_s = int(step.total_seconds())

    def q(query: str) -> pd.DataFrame:
        return source.query_range(query, start, end, step)

    util = q(fresh_pod_samples(GPU_UTIL, step_s))
    if util.empty and not q(series_count(GPU_UTIL)).empty:
        raise DataSourceError(
            f"Prometheus: {GPU_UTIL} exists but no series has a non-empty 'pod' label between {start.isoformat()} "
            f"and {end.isoformat()}: run dcgm-exporter in Kubernetes mode (DCGM_EXPORTER_KUBERNETES=true)"
        )
    # Requests and pod labels only matter as one value per pod (largest request, latest labels): an
    # hourly max_over_time lets the server do that reduction instead of shipping every pod at every step.
    coarse = max(step, pd.Timedelta(hours=1))

    def per_pod(selector: Selector) -> pd.DataFrame:
        return source.query_range(per_pod_max(selector, int(coarse.total_seconds())), start, end + coarse, coarse)

    inputs = RightsizeInput(
        util=util,
        fb=q(fresh_pod_samples(FB_USED, step_s)),
        power=q(fresh_pod_samples(POWER, step_s)),
        requests=per_pod(KSM_GPU_REQUESTS),
        labels=per_pod(Selector(POD_LABELS)),
        deserved=q(volcano_queue_gpus("deserved")),
        allocated=q(volcano_queue_gpus("allocated")),
    )
    return _check(inputs, "Prometheus")


def from_frame(frame: pd.DataFrame, where: str) -> RightsizeInput:
    """Split one long frame holding several metrics (a ``__name__`` column) into the four inputs."""
    if "__name__" not in frame.columns:
        raise InputError(f"{where}: no '__name__' column, so metrics cannot be told apart")
    names = frame["__name__"].astype(str)

    def part(name: str) -> pd.DataFrame:
        rows = frame[names == name]
        return rows.dropna(axis=1, how="all") if not rows.empty else empty_history()

    inputs = RightsizeInput(
        util=part(GPU_UTIL),
        fb=part(FB_USED),
        requests=part(REQUESTS),
        labels=part(POD_LABELS),
        power=part(POWER),
        deserved=_queue_gpus(part(DESERVED)),
        allocated=_queue_gpus(part(ALLOCATED)),
    )
    return _check(inputs, where)


def _queue_gpus(frame: pd.DataFrame) -> pd.DataFrame:
    """Volcano's raw per-queue gauge (milli-units, one series per resource) as GPUs per queue."""
    # No value column: every sample was NaN (``from_frame`` drops all-empty columns), i.e. no data.
    if frame.empty or any(c not in frame.columns for c in ("queue_name", "resource", VALUE)):
        return empty_history()
    gpus = frame[frame["resource"].astype(str) == GPU_RESOURCE]
    # min_count=1: a step whose samples are all NaN stays NaN (unknown; idle_quota leaves it out), not 0 GPUs
    summed = gpus.groupby(["queue_name", TIME])[VALUE].sum(min_count=1) / 1000
    return summed.reset_index()


def from_history(path: Path) -> RightsizeInput:
    """A long CSV/Parquet file, or a directory of the simulator's per-metric Parquet files."""
    if path.is_dir():
        names = (GPU_UTIL, FB_USED, REQUESTS, POD_LABELS, POWER, DESERVED, ALLOCATED)
        wanted = [n for n in names if (path / f"{n}.parquet").is_file()]
        if GPU_UTIL not in wanted:
            raise InputError(f"{path}: no {GPU_UTIL}.parquet in this directory")
        return from_frame(read_metrics(path, wanted), str(path))
    return from_frame(read_history(path), str(path))


def rightsize(inputs: RightsizeInput, settings: RightsizeSettings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-workload recommendations, per-run table) from the joined inputs."""
    runs = runs_from_frames(
        inputs.util,
        inputs.fb,
        inputs.requests,
        inputs.labels,
        pd.Timedelta(seconds=settings.step_s),
        FeatureSettings(busy_threshold_pct=settings.busy_threshold_pct, early_minutes=settings.early_minutes),
        power=inputs.power,
    )
    idle = (
        idle_quota(inputs.deserved, inputs.allocated, settings.elastic.quota_window_h)
        if not (inputs.deserved.empty or inputs.allocated.empty)
        else None
    )
    return recommend(runs, settings, idle), runs
