"""What one loop cycle reads, as Protocols with production and offline implementations.

Injected through the ``Loop`` constructor (STYLE §3): production wires Prometheus, the MLflow champion
and the API server; tests, the offline ``plan`` command and the replay benchmark wire files, a fitted
estimator and the simulator — the cycle itself cannot tell the difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd

from models.frames import ID, TIME, VALUE
from predictor.errors import ModelError, RegistryError
from predictor.planner import allocatable_from_nodes
from predictor.registry import FORECAST_FAMILY
from predictor.sources.queries import QUEUE_DEMAND

if TYPE_CHECKING:  # the seams' Protocols, for annotations only
    from models.forecast.base import BaseForecaster
    from predictor.loop.seams import ChampionRegistry, QueueApi
    from predictor.planner.workload import Workload
    from predictor.sources import MetricSource

__all__ = [
    "ClusterReader",
    "EstimatorForecaster",
    "FileCluster",
    "FileHistory",
    "Forecaster",
    "HistoryReader",
    "KubeCluster",
    "RegistryForecaster",
    "SourceHistory",
    "SourceWorkload",
    "WorkloadReader",
]


class HistoryReader(Protocol):
    def history(self, now: pd.Timestamp) -> pd.DataFrame:
        """Per-queue demand history (``series_id`` = queue name) up to ``now``."""
        ...


class Forecaster(Protocol):
    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        """A forecast frame for every series, and ``{model family: version}`` of what produced it."""
        ...


class ClusterReader(Protocol):
    def queue_objects(self) -> list[dict[str, Any]]: ...

    def allocatable(self, resources: Sequence[str]) -> dict[str, float]: ...


class WorkloadReader(Protocol):
    def workload(self, now: pd.Timestamp) -> Workload | None:
        """Jobs and GPU nodes at ``now`` (``predictor.planner.workload``); ``None`` when unknown."""
        ...


class SourceWorkload:
    """The workload from kube-state-metrics through any ``MetricSource`` (one instant per family)."""

    def __init__(self, source: MetricSource, *, gpus_per_node: int = 8, step_s: float = 60) -> None:
        self.source, self.gpus_per_node, self.step_s = source, gpus_per_node, step_s

    def workload(self, now: pd.Timestamp) -> Workload | None:
        from predictor.planner.workload_ksm import workload_from_ksm
        from predictor.sources.queries import workload_frames

        return workload_from_ksm(workload_frames(self.source, now, self.step_s), gpus_per_node=self.gpus_per_node)


class SourceHistory:
    """History from any ``MetricSource`` (Prometheus, a file) with a per-queue demand query."""

    def __init__(self, source: MetricSource, *,
                 query: str = QUEUE_DEMAND, lookback_h: float = 28 * 24, step_s: float = 3600,
                 queue_label: str = "queue_name") -> None:
        self.source, self.query, self.queue_label = source, query, queue_label
        self.lookback, self.step = pd.Timedelta(hours=lookback_h), pd.Timedelta(seconds=step_s)

    def history(self, now: pd.Timestamp) -> pd.DataFrame:
        frame: pd.DataFrame = self.source.query_range(self.query, now - self.lookback, now, self.step)
        if self.queue_label in frame.columns:
            frame = frame.assign(**{ID: frame[self.queue_label].astype(str)})
        return frame[[ID, TIME, VALUE]].reset_index(drop=True)


class FileHistory:
    """Per-queue history from a long file (``series_id`` = queue), cut at ``now``."""

    def __init__(self, path: Path, *, lookback_h: float = 28 * 24) -> None:
        self.path, self.lookback = path, pd.Timedelta(hours=lookback_h)

    def history(self, now: pd.Timestamp) -> pd.DataFrame:
        from predictor.sources.files import read_history

        frame = read_history(self.path)
        keep = (frame[TIME] <= now) & (frame[TIME] > now - self.lookback)
        return frame.loc[keep, [ID, TIME, VALUE]].reset_index(drop=True)


class EstimatorForecaster:
    """Refit a forecaster (the ``fit``/``predict`` contract of ``models.forecast``) on each cycle's history."""

    def __init__(self, estimator: BaseForecaster, *, version: str = "local", family: str = FORECAST_FAMILY) -> None:
        self.estimator, self.version, self.family = estimator, version, family

    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        from sklearn.base import clone

        try:
            model = clone(self.estimator).fit(history)
            frame: pd.DataFrame = model.predict(horizon, level=(80, 95))
        except (ValueError, ArithmeticError) as exc:
            raise ModelError(f"forecaster {type(self.estimator).__name__} failed: {exc}".splitlines()[0]) from exc
        return frame, {self.family: self.version}


class RegistryForecaster:
    """The champion of ``family`` from the model registry, refitted on the newest history each cycle."""

    def __init__(self, registry: ChampionRegistry, family: str = FORECAST_FAMILY) -> None:
        self.registry, self.family = registry, family

    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        info = self.registry.get(self.family)
        if info is None:
            raise RegistryError(f"no champion for {self.family} in the model registry")
        # The version is the one actually served: after a refused or failed load the registry keeps the
        # last good model, which may be older than the version the alias points at now.
        served = self.registry.load(self.family)
        return EstimatorForecaster(served.estimator, version=str(served.version or info.version),
                                   family=self.family).forecast(history, horizon=horizon)


class KubeCluster:
    """Queues through the Volcano actuator's reads, allocatable GPUs from the Node list."""

    def __init__(self, actuator: QueueApi) -> None:
        self.actuator = actuator

    def queue_objects(self) -> list[dict[str, Any]]:
        objects: list[dict[str, Any]] = self.actuator.list_queues()
        return objects

    def allocatable(self, resources: Sequence[str]) -> dict[str, float]:
        return allocatable_from_nodes(self.actuator.list_nodes(), resources, source="live nodes")


class FileCluster:
    """Queues and nodes from ``kubectl … -o json`` output (offline planning)."""

    def __init__(self, queues: Mapping[str, Any] | list[Any], nodes: Mapping[str, Any] | None = None) -> None:
        self.doc, self.nodes = queues, nodes

    def queue_objects(self) -> list[dict[str, Any]]:
        items = self.doc.get("items") if isinstance(self.doc, Mapping) else self.doc
        return list(items or [])

    def allocatable(self, resources: Sequence[str]) -> dict[str, float]:
        return allocatable_from_nodes(self.nodes, resources) if self.nodes is not None else {}
