"""The fleet: which clusters there are and where each one's metrics are read.

Settings list the clusters (``Settings.clusters``); each reads its own Prometheus or the central store
through ``ScopedSource``. With no clusters listed there is one unnamed cluster (``name is None``) read
from the top-level Prometheus unchanged, and series keep today's names (the queue alone).

Series of a named cluster are named ``<cluster>/<queue>`` wherever clusters meet (training frames,
reports, the registered model's per-series state): Kubernetes names cannot hold ``/``, so the name
splits back without ambiguity, and equal queue names of two clusters never merge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from predictor.errors import ConfigError, DataSourceError
from predictor.sources.scoped import ScopedSource

if TYPE_CHECKING:
    import pandas as pd

    from predictor.config import ClusterSettings, PrometheusSettings, Settings
    from predictor.sources import MetricSource

__all__ = [
    "SEPARATOR",
    "ClusterSource",
    "NamedClusterSource",
    "check_names",
    "cluster_sources",
    "qualify",
    "split_qualified",
]

SEPARATOR = "/"


def qualify(cluster: str | None, name: str) -> str:
    """``cluster/name`` for a named cluster, ``name`` for the unnamed one."""
    return name if cluster is None else f"{cluster}{SEPARATOR}{name}"


def split_qualified(qualified: str) -> tuple[str | None, str]:
    """``("a", "team-x")`` from ``"a/team-x"``; ``(None, "team-x")`` from an unqualified name."""
    cluster, sep, name = qualified.partition(SEPARATOR)
    return (cluster, name) if sep else (None, qualified)


@dataclass(frozen=True)
class ClusterSource:
    """One cluster's name (``None``: the single unnamed cluster), its metrics and its settings."""

    name: str | None
    source: MetricSource
    settings: ClusterSettings | None = None

    def qualify(self, series: str) -> str:
        return qualify(self.name, series)


class NamedClusterSource:
    """A cluster's source whose errors name the cluster: in a fleet, "connection refused" alone does not
    say which of ten Prometheus servers (or which scope of the central store) failed. The error keeps its
    class, so retries and exit codes are unchanged."""

    def __init__(self, name: str, source: MetricSource) -> None:
        self.name, self.source = name, source

    def query_range(self, query: str, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta) -> pd.DataFrame:
        try:
            return self.source.query_range(query, start, end, step)
        except DataSourceError as error:
            raise type(error)(f"cluster {self.name}: {error}") from error


def check_names(settings: Settings, only: Sequence[str] | None) -> None:
    """A ``ConfigError`` naming the names in ``only`` that the settings do not list.

    Commands call it first, so ``--cluster`` with no (or other) clusters listed is named as the problem
    rather than whatever other option is missing.
    """
    known = [cluster.name for cluster in settings.clusters]
    unknown = sorted(set(only or ()) - set(known))
    if unknown:
        listed = ", ".join(known) if known else "no clusters"
        raise ConfigError(f"unknown cluster {', '.join(unknown)}: the settings list {listed}")


def cluster_sources(
    settings: Settings,
    *,
    make_source: Callable[[PrometheusSettings], MetricSource] | None = None,
    only: Sequence[str] | None = None,
) -> list[ClusterSource]:
    """A source per configured cluster (``only``: just these names, in settings order)."""
    if make_source is None:
        from predictor.sources.prometheus import PrometheusSource

        make_source = PrometheusSource
    check_names(settings, only)
    if not settings.clusters:
        return [ClusterSource(None, make_source(settings.prometheus))]
    central: MetricSource | None = None
    out = []
    for cluster in settings.clusters:
        if only and cluster.name not in only:
            continue
        if cluster.prometheus is not None:
            source = make_source(cluster.prometheus)
        else:
            central = central or make_source(settings.prometheus)
            source = ScopedSource(central, {settings.prometheus.cluster_label: cluster.selector_value})
        out.append(ClusterSource(cluster.name, NamedClusterSource(cluster.name, source), cluster))
    return out
