"""A fleet's ``/metrics``: every cluster's loop metrics under one endpoint, each series labelled ``cluster``.

Each cluster's ``Loop`` keeps its own ``LoopMetrics`` (its own registry), so the cycle code is the same with
or without a fleet. This registry merges them at scrape time: same metric names as a single loop, plus a
``cluster`` label on every series, so equal queue names of two clusters stay two series and the rules in
``k8s/`` (which aggregate ``by (cluster, …)``) read a fleet and a single loop alike. The served model is the
process's, not a cluster's: it is reported once, without a ``cluster`` label (``served``). The label's
value is the cluster's value of the central store's cluster label (``ClusterSettings.selector_value``,
its name unless ``label_value`` is set), so the rules can join the loop's series with the clusters' own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from predictor.loop.metrics import LoopMetrics

__all__ = ["CLUSTER_LABEL", "FleetMetrics"]

CLUSTER_LABEL = "cluster"
# Families the process serves once for every cluster (the model in memory): taken from ``served`` only.
_SERVED = (
    "predictor_loop_served_model_info",
    "predictor_loop_served_model_stale",
    "predictor_loop_model_load_failures",
    "predictor_loop_model_age_seconds",
    "predictor_loop_model_max_age_seconds",
    "predictor_loop_model_promotion_info",
)


class FleetMetrics:
    """Per-cluster ``LoopMetrics`` and the process's served-model metrics, exported as one registry."""

    def __init__(
        self,
        clusters: Mapping[str, LoopMetrics] | list[str],
        *,
        ready_within_s: float | None = None,
        live_within_s: float | None = None,
        elapsed: Callable[[], float] = time.monotonic,
        label_values: Mapping[str, str] | None = None,
    ) -> None:
        """``clusters``: name → its loop's metrics (or names, for new ones); ``label_values``: name → the
        ``cluster`` label's value where it is not the name."""
        if isinstance(clusters, Mapping):
            self.clusters = dict(clusters)
        else:
            self.clusters = {
                name: LoopMetrics(ready_within_s=ready_within_s, live_within_s=live_within_s, elapsed=elapsed)
                for name in clusters
            }
        self.label_values = {name: (label_values or {}).get(name, name) for name in self.clusters}
        self.served = LoopMetrics(ready_within_s=ready_within_s, live_within_s=live_within_s, elapsed=elapsed)
        self.registry = CollectorRegistry()
        self.registry.register(_Merged(self))

    def live(self) -> tuple[bool, str]:
        """Alive while any cluster's cycles complete: the clusters share one thread, so a hung cycle stops all."""
        answers = {name: m.live() for name, m in self.clusters.items()}
        if not answers or any(ok for ok, _ in answers.values()):
            return True, "ok"
        return False, "; ".join(f"{name}: {why}" for name, (_, why) in answers.items())

    def ready(self) -> tuple[bool, str]:
        """Ready while any cluster completes cycles: one cluster down must not take every cluster's metrics
        off the scrape (its own ``predictor_loop_last_success_timestamp_seconds{cluster}`` ages instead)."""
        answers = {name: m.ready() for name, m in self.clusters.items()}
        if any(ok for ok, _ in answers.values()):
            return True, "ok"
        return False, "; ".join(f"{name}: {why}" for name, (_, why) in answers.items())


class _Merged(Collector):
    def __init__(self, fleet: FleetMetrics) -> None:
        self.fleet = fleet

    def collect(self) -> Iterator[Metric]:
        merged: dict[str, Metric] = {}

        def add(family: Metric, cluster: str | None) -> None:
            out = merged.get(family.name)
            if out is None:
                out = merged[family.name] = Metric(family.name, family.documentation, family.type, family.unit)
            for sample in family.samples:
                labels = sample.labels if cluster is None else {**sample.labels, CLUSTER_LABEL: cluster}
                out.samples.append(sample._replace(labels=labels))

        for family in self.fleet.served.registry.collect():
            if family.name in _SERVED:
                add(family, None)
        for name, metrics in self.fleet.clusters.items():
            for family in metrics.registry.collect():
                if family.name not in _SERVED:
                    add(family, self.fleet.label_values[name])
        yield from merged.values()
