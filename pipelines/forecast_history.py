"""Training history from Prometheus: one PromQL per series family, and the series named as the planner joins them.

Apart from the training job because it is the job's input, not its modelling: it reads the world (the
sources layer, HTTP clients imported lazily) and names series (cluster- and queue-level GPU demand =
allocated + pending), while ``pipelines.forecast`` fits, scores and registers whatever frame it is given,
from a file or from here. ``pipelines.forecast`` re-exports both names, so callers import them from there.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from models.frames import ID
from predictor.config import Settings
from predictor.errors import InputError
from predictor.sources.queries import CLUSTER_DEMAND, QUEUE_DEMAND
from predictor.timeparse import parse_duration

__all__ = ["DEFAULT_QUERIES", "load_prometheus_history"]

# One PromQL per series family, from the catalogue the loop and the reports read too (no train/serve skew).
DEFAULT_QUERIES: dict[str, str] = {"cluster": CLUSTER_DEMAND, "queue": QUEUE_DEMAND}


def load_prometheus_history(
    settings: Settings,
    *,
    family: str = "queue",
    query: str | None = None,
    start: pd.Timestamp,
    end: pd.Timestamp,
    step: str = "1h",
    clusters: Sequence[str] | None = None,
) -> pd.DataFrame:
    """History for one series family from Prometheus (``query`` overrides the family's default).

    With clusters in the settings, every cluster's (``clusters``: only these) series, named
    ``cluster/<series>`` and carrying a ``cluster`` column, so the model's per-series state never merges
    equal queue names of two clusters; with none, today's frame.
    """
    if query is None:
        if family not in DEFAULT_QUERIES:
            raise InputError(f"unknown series family {family!r} (known: {', '.join(DEFAULT_QUERIES)})")
        query = DEFAULT_QUERIES[family]
    # imported here: the module belongs to the sources layer and pulls in HTTP clients
    from predictor.sources.clusters import cluster_sources

    parts = []
    for cluster in cluster_sources(settings, only=clusters):
        frame: pd.DataFrame = cluster.source.query_range(query, start, end, parse_duration(step, name="step"))
        if frame.empty:
            where = "" if cluster.name is None else f" of cluster {cluster.name}"
            raise InputError(
                f"Prometheus returned no samples for the {family} demand query{where} between {start} and {end}"
            )
        frame = _named(frame.copy(), family, query)
        if cluster.name is not None:
            frame[ID] = frame[ID].map(cluster.qualify)
            frame["cluster"] = cluster.name
        parts.append(frame)
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)


def _named(frame: pd.DataFrame, family: str, query: str) -> pd.DataFrame:
    # The planner joins forecasts to Queue objects by name: a queue series is named after its queue,
    # the cluster series "cluster"; any other query keeps the family prefix on Prometheus' series id.
    if family == "queue" and query == DEFAULT_QUERIES["queue"] and "queue_name" in frame.columns:
        frame[ID] = frame["queue_name"].astype(str)
    elif family == "cluster" and frame[ID].nunique() == 1:
        frame[ID] = "cluster"
    else:
        frame[ID] = family + "/" + frame[ID].astype(str)
    return frame
