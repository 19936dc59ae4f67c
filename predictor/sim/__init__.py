"""Trace-driven GPU cluster simulator that writes the history a real cluster would export.

Replays a job table (Philly-like, or synthetic) through a Volcano-like gang scheduler and emits DCGM,
Volcano, kube-state-metrics and node_exporter series under their real names and units, with optional
labelled faults, as OpenMetrics (for promtool backfill) and Parquet long frames. The demo, the
integration tests against a real Prometheus, root-cause training data and what-if quota runs all start
here. Public surface below; everything else is private to the package.
"""

from __future__ import annotations

from predictor.sim.cluster import (
    GPU_TYPES,
    ClusterSpec,
    GpuType,
    QueueSpec,
    Quota,
    QuotaChange,
    default_queues,
    parse_gpu_types,
    queues_from_frame,
    quota_schedule_from_frame,
)
from predictor.sim.faults import CAUSES
from predictor.sim.jobs import load_jobs, normalise_jobs, philly_sample, synthetic_jobs
from predictor.sim.openmetrics import write_openmetrics
from predictor.sim.parquet import write_parquet
from predictor.sim.run import METRIC_SETS, QuotaPolicy, SimResult, SimSettings, simulate
from predictor.sim.scheduler import Scheduler, SchedulerResult
from predictor.sim.series import Family, StepGrid
from predictor.sim.summary import fragmentation, queue_summary, summary_totals
from predictor.sim.volcano import VolcanoSettings

__all__ = [
    "CAUSES",
    "GPU_TYPES",
    "METRIC_SETS",
    "ClusterSpec",
    "Family",
    "GpuType",
    "QueueSpec",
    "Quota",
    "QuotaChange",
    "QuotaPolicy",
    "Scheduler",
    "SchedulerResult",
    "SimResult",
    "SimSettings",
    "StepGrid",
    "VolcanoSettings",
    "default_queues",
    "fragmentation",
    "load_jobs",
    "normalise_jobs",
    "parse_gpu_types",
    "philly_sample",
    "queue_summary",
    "queues_from_frame",
    "quota_schedule_from_frame",
    "simulate",
    "summary_totals",
    "synthetic_jobs",
    "write_openmetrics",
    "write_parquet",
]
