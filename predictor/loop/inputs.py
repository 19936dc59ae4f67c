"""What one loop cycle reads, as Protocols with production and offline implementations.

Injected through the ``Loop`` constructor (a Protocol at each seam): production wires Prometheus, the MLflow champion
and the API server; tests, the offline ``plan`` command and the replay benchmark wire files, a fitted
estimator and the simulator — the cycle itself cannot tell the difference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import pandas as pd

from models.frames import ID, TIME, VALUE
from predictor.errors import ModelError
from predictor.loop.champion import ChampionCache, model_uri
from predictor.planner import allocatable_from_nodes, gpu_nodes_not_ready
from predictor.registry import FORECAST_FAMILY
from predictor.sources.queries import QUEUE_DEMAND

if TYPE_CHECKING:  # the seams' Protocols, for annotations only
    from models.forecast.base import BaseForecaster
    from predictor.loop.metrics import LoopMetrics
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

    def gpu_nodes_not_ready(self, resources: Sequence[str]) -> tuple[int, int]:
        """``(not ready or cordoned, all)`` GPU nodes as of the last ``allocatable`` read."""
        ...


class WorkloadReader(Protocol):
    def workload(self, now: pd.Timestamp) -> Workload | None:
        """Jobs and GPU nodes at ``now`` (``predictor.planner.workload``); ``None`` when unknown."""
        ...


class SourceWorkload:
    """The workload from kube-state-metrics through any ``MetricSource`` (one instant per family)."""

    def __init__(self, source: MetricSource, *, gpus_per_node: int | None = None, step_s: float = 60) -> None:
        self.source, self.gpus_per_node, self.step_s = source, gpus_per_node, step_s

    def workload(self, now: pd.Timestamp) -> Workload | None:
        from predictor.planner.workload_ksm import workload_from_ksm
        from predictor.sources.queries import workload_frames

        return workload_from_ksm(workload_frames(self.source, now, self.step_s), gpus_per_node=self.gpus_per_node)


class SourceHistory:
    """History from any ``MetricSource`` (Prometheus, a file) with a per-queue demand query."""

    def __init__(
        self,
        source: MetricSource,
        *,
        query: str = QUEUE_DEMAND,
        lookback_h: float = 28 * 24,
        step_s: float = 3600,
        queue_label: str = "queue_name",
    ) -> None:
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
    """Fit a local forecaster (the ``fit``/``predict`` contract of ``models.forecast``) on each cycle's history.

    The offline path (``plan --model``, ``loop --model``, replays): an unregistered estimator has nothing
    fitted to serve, so it is fitted here. Registered champions are served by ``RegistryForecaster``.
    """

    def __init__(self, estimator: BaseForecaster, *, version: str = "local", family: str = FORECAST_FAMILY) -> None:
        self.estimator, self.version, self.family = estimator, version, family

    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        from sklearn.base import clone

        frame = _predict(lambda: clone(self.estimator).fit(history), self.estimator, horizon)
        return frame, {self.family: self.version}


def _predict(model: Callable[[], BaseForecaster], estimator: Any, horizon: int) -> pd.DataFrame:
    try:
        frame: pd.DataFrame = model().predict(horizon, level=(80, 95))
    except (ValueError, ArithmeticError) as exc:
        raise ModelError(f"forecaster {type(estimator).__name__} failed: {exc}".splitlines()[0]) from exc
    return frame


@runtime_checkable
class ReportsServing(Protocol):
    """A forecaster that reports what it serves on the loop's ``/metrics`` (the loop hands it its metrics)."""

    def report_to(self, metrics: LoopMetrics) -> None: ...


class RegistryForecaster:
    """The champion of ``family``, served as registered: ``update(history).predict(h)``, never refitted.

    The model is loaded once and kept in memory (``ChampionCache``); it is reloaded only when the
    champion's version changes. A champion that fails to load (refused state, registry outage) leaves the
    last good model serving, marked ``stale`` on ``/metrics`` with a load-failure count, and the load is
    retried next cycle.
    """

    def __init__(
        self, registry: ChampionRegistry, family: str = FORECAST_FAMILY, metrics: LoopMetrics | None = None
    ) -> None:
        self.registry, self.family = registry, family
        self.champion = ChampionCache(registry, family, metrics)

    @property
    def stale(self) -> str:
        """Why the model in memory is not the champion ("" when it is)."""
        return self.champion.stale

    def report_to(self, metrics: LoopMetrics) -> None:
        self.champion.metrics = metrics

    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        served, version = self.champion.current()
        frame = served.forecast(history, horizon)  # the one serving call (the replay makes it too)
        return frame, {self.family: model_uri(self.family, version)}


class KubeCluster:
    """Queues through the Volcano actuator's reads, allocatable GPUs from the Node list."""

    def __init__(self, actuator: QueueApi) -> None:
        self.actuator = actuator
        self._nodes: Any = None  # the Node list of the last allocatable read (one API call a cycle)

    def queue_objects(self) -> list[dict[str, Any]]:
        objects: list[dict[str, Any]] = self.actuator.list_queues()
        return objects

    def allocatable(self, resources: Sequence[str]) -> dict[str, float]:
        self._nodes = self.actuator.list_nodes()
        return allocatable_from_nodes(self._nodes, resources, source="live nodes")

    def gpu_nodes_not_ready(self, resources: Sequence[str]) -> tuple[int, int]:
        return gpu_nodes_not_ready(self._nodes, resources)


class FileCluster:
    """Queues and nodes from ``kubectl … -o json`` output (offline planning)."""

    def __init__(self, queues: Mapping[str, Any] | list[Any], nodes: Mapping[str, Any] | None = None) -> None:
        self.doc, self.nodes = queues, nodes

    def queue_objects(self) -> list[dict[str, Any]]:
        items = self.doc.get("items") if isinstance(self.doc, Mapping) else self.doc
        return list(items or [])

    def allocatable(self, resources: Sequence[str]) -> dict[str, float]:
        return allocatable_from_nodes(self.nodes, resources) if self.nodes is not None else {}

    def gpu_nodes_not_ready(self, resources: Sequence[str]) -> tuple[int, int]:
        return gpu_nodes_not_ready(self.nodes, resources) if self.nodes is not None else (0, 0)
