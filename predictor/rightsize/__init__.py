"""Right-sizing: what GPU jobs and workloads really use, joined from DCGM and kube-state-metrics history.

``features`` turns long metric frames into per-run usage tables, ``recommend`` turns those into
per-workload GPU and memory recommendations, ``load`` reads the inputs from Prometheus, a history file or
the simulator's output and names whatever series or label is missing.
"""

from __future__ import annotations

from predictor.rightsize.features import (
    RUN_COLUMNS,
    FeatureSettings,
    runs_from_frames,
    workload_of_job,
    workload_of_pod,
)
from predictor.rightsize.load import RightsizeInput, from_frame, from_history, from_source, rightsize
from predictor.rightsize.recommend import OUTPUT_COLUMNS, RightsizeSettings, recommend

__all__ = [
    "OUTPUT_COLUMNS",
    "RUN_COLUMNS",
    "FeatureSettings",
    "RightsizeInput",
    "RightsizeSettings",
    "from_frame",
    "from_history",
    "from_source",
    "recommend",
    "rightsize",
    "runs_from_frames",
    "workload_of_job",
    "workload_of_pod",
]
