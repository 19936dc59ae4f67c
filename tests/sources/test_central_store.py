"""Fleets: a real central store answers per cluster exactly as each cluster's own Prometheus.

Two cluster Prometheus servers with ``external_labels: {cluster: a|b}`` remote-write into a third started
with ``--web.enable-remote-write-receiver`` (``tests/support/centralprom.py``). Both clusters are
simulated from different seeds with the same queue names, so a query that missed the cluster matcher
would merge them. Every project query read through ``ScopedSource(central, cluster=a)`` must give the
frame that ``a``'s own Prometheus gives; the commands are compared the same way in
``tests/sources/test_central_commands.py``.
"""

from __future__ import annotations

import pandas as pd
import pytest
import requests
from hypothesis import given, settings

from models.frames import ID, TIME, VALUE
from predictor.config import PrometheusSettings
from predictor.sources.prometheus import PrometheusSource
from predictor.sources.queries import volcano_queue_gpus, workload_frames
from predictor.sources.scoped import ScopedSource, scope_query
from tests.sources.fleetdata import DAYS, SEEDS, STEP
from tests.support.centralprom import CentralStore
from tests.support.localprom import prometheus_available
from tests.support.scoped_queries import PROJECT_QUERIES, random_scoped_queries

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not prometheus_available(), reason="prometheus not installed (Debian 'prometheus')"),
]
# Families the "core" simulator metrics lack (the comparison still runs on them: both answers empty).
SIM_LACKS = {
    "pod_annotations",
    "pod_tolerations",
    "pod_nodeselectors",
    "node_taints",
    "node_unschedulable",
    "node_not_ready",
    "node_labels",
}


def _sources(store: CentralStore, name: str) -> tuple[PrometheusSource, ScopedSource]:
    own = PrometheusSource(PrometheusSettings(url=store.clusters[name]))
    return own, ScopedSource(PrometheusSource(PrometheusSettings(url=store.url)), {"cluster": name})


def _same(own: pd.DataFrame, central: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(central.reset_index(drop=True), own.reset_index(drop=True), check_like=True)


@pytest.mark.parametrize("name", sorted(PROJECT_QUERIES))
def test_every_project_query_reads_one_cluster_out_of_the_central_store(
    central_store: tuple[CentralStore, pd.Timestamp], name: str
) -> None:
    store, start = central_store
    end = start + pd.Timedelta(days=DAYS) - STEP
    answers = []
    for cluster in SEEDS:
        own, central = _sources(store, cluster)
        expected = own.query_range(PROJECT_QUERIES[name], start, end, pd.Timedelta(hours=1))
        _same(expected, central.query_range(PROJECT_QUERIES[name], start, end, pd.Timedelta(hours=1)))
        answers.append(expected)
    # An empty answer would compare equal trivially: only families the simulator does not export may be empty.
    assert (answers[0].empty and answers[1].empty) == (name in SIM_LACKS)


def test_workload_frames_equal_per_cluster(central_store: tuple[CentralStore, pd.Timestamp]) -> None:
    store, start = central_store
    at = start + pd.Timedelta(days=1)
    for cluster in SEEDS:
        own, central = _sources(store, cluster)
        expected, got = workload_frames(own, at), workload_frames(central, at)
        assert expected.keys() == got.keys()
        for name in expected:
            _same(expected[name], got[name])


def test_equal_queue_names_stay_apart(central_store: tuple[CentralStore, pd.Timestamp]) -> None:
    store, start = central_store
    end = start + pd.Timedelta(days=DAYS) - STEP
    hour = pd.Timedelta(hours=1)
    # The Volcano branch of QUEUE_DEMAND: unscoped, its pod-level fallback cannot even be evaluated on a central
    # store whose clusters hold equal pod names (the join on (namespace, pod) is many-to-many, HTTP 422).
    demand = volcano_queue_gpus("request")
    per_cluster = {c: _sources(store, c)[1].query_range(demand, start, end, hour) for c in SEEDS}
    queues = {c: set(frame[ID]) for c, frame in per_cluster.items()}
    assert queues["a"] & queues["b"], "both clusters should share queue names"
    shared = sorted(queues["a"] & queues["b"])
    a, b = (per_cluster[c][per_cluster[c][ID].isin(shared)].set_index([ID, TIME])[VALUE] for c in SEEDS)
    assert not a.equals(b)
    # Unscoped, the central store merges them: what the cluster matcher prevents.
    unscoped = PrometheusSource(PrometheusSettings(url=store.url)).query_range(demand, start, end, hour)
    merged = unscoped[unscoped[ID].isin(shared)].set_index([ID, TIME])[VALUE]
    total = a.add(b, fill_value=0).reindex(merged.index)
    pd.testing.assert_series_equal(merged, total, check_names=False)


@settings(max_examples=60)
@given(case=random_scoped_queries())
def test_a_real_prometheus_accepts_scoped_random_queries(
    central_store: tuple[CentralStore, pd.Timestamp], case: tuple[str, dict[str, str], str]
) -> None:
    store, start = central_store
    query, matchers, _ = case
    for text in (query, scope_query(query, matchers)):
        answer = requests.get(
            f"{store.url}/api/v1/query", params={"query": text, "time": str(start.timestamp())}, timeout=10
        )
        assert answer.json()["status"] == "success", (text, answer.text)
