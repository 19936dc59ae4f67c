"""Gather a report's input tables from the simulator's Parquet output (``--history DIR``) or Prometheus.

Both paths end in the same ``ReportInputs`` (hourly, in GPUs, ``series_id`` = queue), so the report model
never knows where its numbers came from. Volcano reports milli-GPUs; "really used" GPUs are the sum of
DCGM utilisation / 100 over each queue's GPUs (busy-equivalent GPUs), joined to queues through the
pod label ``volcano.sh/queue-name`` where kube-state-metrics has it and the namespace otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from models.frames import ID, TIME, VALUE
from predictor.config import PrometheusSettings
from predictor.errors import DataSourceError, InputError, redact_url
from predictor.reports.fragmentation import live_fragmentation
from predictor.reports.model import DEFAULT_RESOURCE
from predictor.reports.podjobs import jobs_from_pods
from predictor.sim import normalise_jobs
from predictor.sources import queries
from predictor.timeparse import parse_duration
from predictor.userfiles import check_size

if TYPE_CHECKING:
    from predictor.sources import MetricSource

__all__ = [
    "ReportInputs",
    "inputs_from_directory",
    "inputs_from_prometheus",
    "rightsize_from_directory",
    "rightsize_from_prometheus",
    "rightsize_savings",
]

_GPU_RESOURCE_KSM = queries.KSM_GPU_RESOURCE


@dataclass
class ReportInputs:
    """Everything a report needs besides the forecast and the recommendations."""

    quotas: pd.DataFrame  # queue, resource, guarantee, deserved, capability
    allocated: pd.DataFrame  # history frames, series_id = queue, hourly GPUs
    used: pd.DataFrame
    demand: pd.DataFrame
    total_gpus: float
    fragmentation: float | None = None
    sources: dict[str, str] = field(default_factory=dict)
    jobs: pd.DataFrame | None = None  # the job attempts behind the history, where known (the what-if replays it)
    replay_jobs: pd.DataFrame | None = None  # every submitted job (simulator input, or rebuilt from pods), if known
    whatif_note: str = ""  # why the what-if cannot replay this history (one line in the report), if it cannot
    notes: list[str] = field(default_factory=list)
    fragmentation_advice: tuple[str, ...] = ()  # the live FGD and what to drain (reports.fragmentation)

    @property
    def as_of(self) -> pd.Timestamp:
        return pd.Timestamp(max(self.allocated[TIME].max(), self.used[TIME].max()))


def _hourly(frame: pd.DataFrame, key: str, scale: float = 1.0, how: str = "mean") -> pd.DataFrame:
    """Mean per (key, hour) of a long frame, as a history frame with ``series_id`` = the key's value."""
    if frame.empty:
        return pd.DataFrame(
            {ID: pd.Series(dtype=str), TIME: pd.Series(dtype="datetime64[ns, UTC]"), VALUE: pd.Series(dtype=float)}
        )
    hours = pd.to_datetime(frame[TIME], utc=True).dt.floor("h")
    if how == "sum":  # per-GPU series: Σ over GPUs and samples / samples per hour (absent sample = idle)
        stamps = pd.Series(frame[TIME].unique()).sort_values()
        step = stamps.diff().dropna().min() if len(stamps) > 1 else pd.Timedelta(hours=1)
        per_hour = pd.Timedelta(hours=1) / max(step, pd.Timedelta(seconds=1))
        grouped = frame.groupby([frame[key].astype(str), hours.rename("hour")], observed=True)[VALUE].sum() / per_hour
    else:
        grouped = frame.groupby([frame[key].astype(str), hours.rename("hour")], observed=True)[VALUE].mean()
    out = grouped.reset_index().rename(columns={key: ID, "hour": TIME})
    out[VALUE] = out[VALUE].astype("float64") * scale
    out[ID] = out[ID].astype(str)
    return out[[ID, TIME, VALUE]].sort_values([ID, TIME], kind="stable").reset_index(drop=True)


def _on_grid(used: pd.DataFrame, allocated: pd.DataFrame) -> pd.DataFrame:
    """Usage on the allocation grid: an hour with no DCGM series for a queue means no GPU was busy for it."""
    grid = allocated[[ID, TIME]]
    out = grid.merge(used, on=[ID, TIME], how="left")
    out[VALUE] = out[VALUE].fillna(0.0)
    return out.sort_values([ID, TIME], kind="stable").reset_index(drop=True)


def _read(directory: Path, name: str, columns: list[str]) -> pd.DataFrame:
    path = directory / f"{name}.parquet"
    if not path.is_file():
        raise InputError(f"{directory}: no {name}.parquet (is this the simulator's output directory?)")
    check_size(path, "table", InputError, "table")
    try:
        table = pq.read_table(path, columns=columns)
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"{path}: cannot read: {exc}".splitlines()[0]) from exc
    frame: pd.DataFrame = table.to_pandas()
    for column in frame.columns:
        if isinstance(frame[column].dtype, pd.CategoricalDtype):
            frame[column] = frame[column].astype(str)
    return frame


def _latest(frame: pd.DataFrame, key: str) -> pd.Series:
    newest = frame.sort_values(TIME).groupby(key, observed=True).tail(1)
    return pd.Series(newest[VALUE].to_numpy(float), index=newest[key].astype(str).to_numpy())


def inputs_from_directory(directory: Path) -> ReportInputs:
    """Inputs from ``predictor simulate --out DIR`` (``DIR/metrics/*.parquet``, ``DIR/summary.parquet``)."""
    if not directory.is_dir():
        raise InputError(f"--history {directory}: no such directory")
    metrics = directory / "metrics" if (directory / "metrics").is_dir() else directory
    volcano = {}
    for what in ("allocated", "request", "deserved", "capacity"):
        frame = _read(metrics, queries.volcano_queue_metric(what), ["queue_name", "resource", TIME, VALUE])
        volcano[what] = frame[frame["resource"] == DEFAULT_RESOURCE]
    util = _read(metrics, "DCGM_FI_DEV_GPU_UTIL", ["namespace", TIME, VALUE])
    util = util[util["namespace"] != ""]
    nodes = _read(metrics, "kube_node_status_allocatable", ["resource", TIME, VALUE])
    nodes = nodes[nodes["resource"] == _GPU_RESOURCE_KSM]
    if nodes.empty:
        raise InputError(f"{metrics}: kube_node_status_allocatable has no {_GPU_RESOURCE_KSM} samples")
    newest = nodes[TIME].max()
    total = float(nodes.loc[nodes[TIME] == newest, VALUE].sum())
    deserved = _latest(volcano["deserved"], "queue_name") / 1000
    capability = _latest(volcano["capacity"], "queue_name") / 1000
    names = sorted(deserved.index)
    quotas = pd.DataFrame(
        {
            "queue": names,
            "resource": DEFAULT_RESOURCE,
            "guarantee": 0.0,
            "deserved": [float(deserved[n]) for n in names],
            "capability": [float(capability.get(n, np.inf)) for n in names],
        }
    )
    fragmentation = None
    summary = directory / "summary.parquet"
    if summary.is_file():
        try:
            table = pq.read_table(summary, columns=[TIME, "fragmentation_rate"]).to_pandas()
        except (OSError, ValueError, KeyError) as exc:  # not Parquet, or without those columns
            raise InputError(f"{summary}: cannot read {TIME} and fragmentation_rate: {exc}".splitlines()[0]) from exc
        recent = table[pd.to_datetime(table[TIME], utc=True) > newest - pd.Timedelta(days=7)]
        fragmentation = float(recent["fragmentation_rate"].mean()) if len(recent) else None
    allocated = _hourly(volcano["allocated"], "queue_name", 1 / 1000)
    attempts, submitted = directory / "jobs_out.parquet", directory / "jobs_in.parquet"
    return ReportInputs(
        jobs=pd.read_parquet(attempts) if attempts.is_file() else None,
        # The simulator's input, where kept (the demo keeps it): jobs that never started are replayed too.
        replay_jobs=normalise_jobs(pd.read_parquet(submitted), source=str(submitted)) if submitted.is_file() else None,
        whatif_note=""
        if attempts.is_file() or submitted.is_file()
        else f"what-if: no job table (jobs_out.parquet) in {directory}",
        quotas=quotas,
        allocated=allocated,
        used=_on_grid(_hourly(util, "namespace", 1 / 100, how="sum"), allocated),
        demand=_hourly(volcano["request"], "queue_name", 1 / 1000),
        total_gpus=total,
        fragmentation=fragmentation,
        sources={
            "history": str(directory),
            "used GPUs": "Σ DCGM_FI_DEV_GPU_UTIL / 100 per namespace (= queue)",
            "quotas": "volcano_queue_{deserved,capacity}_scalar_resources, newest sample",
        },
        notes=["guarantee is not exported by Volcano's metrics: shown as 0"],
    )


# One range query per table, each from the catalogue: "demand" is the very text training and the loop read.
PROMQL = {
    "allocated": queries.QUEUE_ALLOCATED,
    "demand": queries.QUEUE_DEMAND,
    "deserved": queries.QUEUE_DESERVED,
    "capability": queries.QUEUE_CAPABILITY,
    "used": queries.QUEUE_USED,
    "total": queries.CLUSTER_ALLOCATABLE,
}


def inputs_from_prometheus(
    settings: PrometheusSettings,
    *,
    end: pd.Timestamp,
    days: int = 35,
    step: str = "5m",
    source: MetricSource | None = None,
    cluster: str | None = None,
    whatif_days: int = 14,
) -> ReportInputs:
    """Inputs from a Prometheus-compatible server: one range query per table, aggregated server-side.

    Queried at the scrape step and averaged per hour here, exactly as the file path averages the
    simulator's samples (a 1 h range step would read one instant per hour instead of the hour's mean).
    ``source``/``cluster``: one cluster of a fleet (``predictor.sources.clusters``), read through its source.
    The what-if replays the jobs of the last ``whatif_days`` (the window and the week before it), rebuilt from
    kube-state-metrics pods (``predictor.reports.podjobs``).
    """
    if source is None:
        from predictor.sources.prometheus import PrometheusSource

        source = PrometheusSource(settings)
    start = end - pd.Timedelta(days=days)
    frames: dict[str, pd.DataFrame] = {}
    for name, query in PROMQL.items():
        frame = source.query_range(query, start, end, parse_duration(step, name="step"))
        if frame.empty:
            where = "" if cluster is None else f" (cluster {cluster})"
            raise DataSourceError(f"Prometheus at {settings.url}{where} returned no samples for the {name} query")
        if name == "total":
            frames[name] = frame[[ID, TIME, VALUE]]
            continue
        frame = frame.assign(**{ID: frame[queries.QUEUE_LABEL].astype(str)})
        frames[name] = _hourly(frame, ID, how="sum" if name == "used" else "mean")
    deserved, capability = _latest(frames["deserved"], ID), _latest(frames["capability"], ID)
    names = sorted(deserved.index)
    quotas = pd.DataFrame(
        {
            "queue": names,
            "resource": DEFAULT_RESOURCE,
            "guarantee": 0.0,
            "deserved": [float(deserved[n]) for n in names],
            "capability": [float(capability.get(n, np.inf)) for n in names],
        }
    )
    total = float(frames["total"].sort_values(TIME)[VALUE].iloc[-1])
    live = live_fragmentation(source, end)
    pods = jobs_from_pods(source, end - pd.Timedelta(days=whatif_days), end)
    replay_notes = []
    if pods.left_out:
        replay_notes.append(f"what-if: {pods.left_out} GPU pods never ran in the window and are not replayed")
    if pods.running:
        replay_notes.append(f"what-if: {pods.running} jobs still running at the end replay their run time so far")
    return ReportInputs(
        replay_jobs=pods.jobs,
        whatif_note="" if pods.jobs is not None else f"what-if: {pods.why}",
        quotas=quotas,
        allocated=frames["allocated"],
        used=_on_grid(frames["used"], frames["allocated"]),
        demand=frames["demand"],
        total_gpus=total,
        sources={
            "history": f"Prometheus {redact_url(settings.url)}"
            f"{'' if cluster is None else f', cluster {cluster}'}, {days} days to {end.isoformat()}"
        },
        notes=[
            "guarantee is not exported by Volcano's metrics: shown as 0",
            *(
                ["fragmentation needs kube-state-metrics pod GPU requests with their node: none found"]
                if live is None
                else []
            ),
            *replay_notes,
        ],
        fragmentation=None if live is None else live[0],
        fragmentation_advice=() if live is None else live[1],
    )


def rightsize_savings(table: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The report's workload table from ``predictor.rightsize`` output: GPUs recommended away × run hours.

    Workloads whose recommendation is "not enough data" (no number) are left out rather than guessed.
    """
    per_workload = runs.groupby(["namespace", "workload"])
    hours = per_workload["runtime_h"].sum().rename("hours").to_frame()
    if "energy_kwh" in runs.columns:  # DCGM power × run time; NaN for a workload with no power series
        hours = hours.join(per_workload["energy_kwh"].sum(min_count=1).rename("energy_kwh"))
    merged = table.merge(hours.reset_index(), on=["namespace", "workload"], how="left")
    merged = merged[pd.to_numeric(merged["recommended_gpus"], errors="coerce").notna()]
    request = merged["gpu_request"].astype(float)
    recommended = merged["recommended_gpus"].astype(float)
    return pd.DataFrame(
        {
            "workload": merged["namespace"].astype(str) + "/" + merged["workload"].astype(str),
            "queue": merged["queue"].astype(str),
            "requested_gpus": request,
            "recommended_gpus": recommended,
            "savings_gpu_h": ((request - recommended).clip(lower=0) * merged["hours"].fillna(0.0)).astype(float),
            # the report's energy section (predictor.reports.energy) sums these per queue
            "energy_kwh": merged["energy_kwh"].astype(float) if "energy_kwh" in merged.columns else float("nan"),
            "energy_saving_kwh_week": pd.to_numeric(merged["energy_saving_kwh_week"], errors="coerce")
            if "energy_saving_kwh_week" in merged.columns
            else float("nan"),
        }
    ).reset_index(drop=True)


def rightsize_from_directory(directory: Path, step_s: int = 300) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(recommendations, runs)`` of ``predictor.rightsize`` on the simulator's metrics, as ``predictor
    rightsize --history DIR/metrics`` computes them."""
    from predictor.rightsize import RightsizeSettings, from_history, rightsize

    metrics = directory / "metrics" if (directory / "metrics").is_dir() else directory
    return rightsize(from_history(metrics), RightsizeSettings(step_s=step_s))


def rightsize_from_prometheus(
    settings: PrometheusSettings,
    *,
    end: pd.Timestamp,
    days: int = 7,
    step_s: int = 300,
    source: MetricSource | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(recommendations, runs)`` of ``predictor.rightsize`` over the last ``days`` of a Prometheus server
    (``source``: one cluster of a fleet)."""
    from predictor.rightsize import RightsizeSettings, from_source, rightsize

    if source is None:
        from predictor.sources.prometheus import PrometheusSource

        source = PrometheusSource(settings)
    runs = from_source(source, end - pd.Timedelta(days=days), end, pd.Timedelta(seconds=step_s))
    return rightsize(runs, RightsizeSettings(step_s=step_s))
