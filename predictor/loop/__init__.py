"""The scheduling loop: each cycle reads history, forecasts with the champion, plans and applies safely.

``Loop(settings, cluster=…, history=…, forecaster=…, actuator=…)`` is wired by the CLI (production) or by
tests and the replay benchmark (files, a fitted estimator, the simulator); ``run_once`` is one cycle.
"""

from __future__ import annotations

from predictor.loop.cycle import CycleReport, Loop, cycle_slot
from predictor.loop.inputs import (
    DEMAND_QUERY,
    ClusterReader,
    EstimatorForecaster,
    FileCluster,
    FileHistory,
    Forecaster,
    HistoryReader,
    KubeCluster,
    RegistryForecaster,
    SourceHistory,
    load_json_or_yaml,
)
from predictor.loop.metrics import LoopMetrics, MetricsServer

__all__ = [
    "DEMAND_QUERY",
    "ClusterReader",
    "CycleReport",
    "EstimatorForecaster",
    "FileCluster",
    "FileHistory",
    "Forecaster",
    "HistoryReader",
    "KubeCluster",
    "Loop",
    "LoopMetrics",
    "MetricsServer",
    "RegistryForecaster",
    "SourceHistory",
    "cycle_slot",
    "load_json_or_yaml",
]
