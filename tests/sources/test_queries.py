"""The PromQL catalogue: every consumer reads a family's one text, and queue demand works with or without Volcano.

Training (``pipelines.forecast``), the loop (``SourceHistory``) and the reports (``inputs_from_prometheus``)
must resolve a family to the very text in ``predictor.sources.queries``; a second copy that drifts is a
model trained on data it is never served. The real-Prometheus half checks that the one queue-demand text
gives one series per queue, named after it, on a history with only Volcano's metrics and on one with only
kube-state-metrics, and that training and the loop read the same frame from it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from pipelines.forecast import DEFAULT_QUERIES, load_prometheus_history
from predictor import sim
from predictor.config import PrometheusSettings, Settings
from predictor.loop import SourceHistory
from predictor.loop.demand import SourceJobs
from predictor.reports.inputs import PROMQL
from predictor.rightsize.features import REQUESTS
from predictor.sources import PrometheusSource, Selector, queries
from predictor.sources.queries import CATALOGUE
from tests.k8s.promql import recording_rules
from tests.support.localprom import LocalPrometheus

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "promql_catalogue.json"


class RecordingSource:
    """A ``MetricSource`` that remembers the queries it was asked and answers one queue's sample."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def query_range(self, query: str, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta) -> pd.DataFrame:
        self.asked.append(query)
        return pd.DataFrame(
            {"series_id": ['{queue_name="a"}'], "timestamp": [end], "value": [1.0], "queue_name": ["a"]}
        )


def _loop_query() -> str:
    source = RecordingSource()
    SourceHistory(source).history(pd.Timestamp("2026-01-05T00:00Z"))
    assert len(source.asked) == 1
    return source.asked[0]


def _jobs_query() -> str:
    source = RecordingSource()
    SourceJobs(source).pending(pd.Timestamp("2026-01-05T00:00Z"))
    assert len(source.asked) == 1
    return source.asked[0]


def _uses() -> dict[str, list[tuple[str, str]]]:
    """``{family: [(consumer, text it reads)]}`` through each consumer's public entry point."""
    return {
        "cluster_demand": [("training cluster family", DEFAULT_QUERIES["cluster"])],
        "queue_demand": [
            ("training queue family", DEFAULT_QUERIES["queue"]),
            ("loop SourceHistory default", _loop_query()),
            ("reports demand table", PROMQL["demand"]),
        ],
        "queue_allocated": [("reports allocated table", PROMQL["allocated"])],
        "queue_deserved": [("reports deserved table", PROMQL["deserved"])],
        "queue_capability": [("reports capability table", PROMQL["capability"])],
        "queue_used": [("reports used table", PROMQL["used"])],
        "cluster_allocatable": [("reports total table", PROMQL["total"])],
        "queue_pending": [("loop SourceJobs default (demand model's job input)", _jobs_query())],
    }


def test_every_family_resolves_to_the_catalogue_text_wherever_it_is_used() -> None:
    uses = _uses()
    assert set(uses) == set(CATALOGUE), "a catalogue family nobody reads, or a use of an unknown family"
    for family, consumers in uses.items():
        for consumer, text in consumers:
            assert text == CATALOGUE[family], f"{consumer} reads a different {family} query"
    # The same object, not an equal copy: a consumer refers to the catalogue instead of restating it.
    assert DEFAULT_QUERIES["queue"] is PROMQL["demand"] is queries.QUEUE_DEMAND
    # Every query training and the reports run is a catalogue entry.
    assert set(DEFAULT_QUERIES.values()) | set(PROMQL.values()) <= set(CATALOGUE.values())


def test_catalogue_texts_are_pinned() -> None:
    """Changing a query changes what models are trained and served on: do it on purpose, here and in the golden."""
    assert dict(CATALOGUE) == json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_recorded_volcano_demand_is_the_volcano_branch_of_queue_demand() -> None:
    # The alerts compare forecasts with this recording; on a Volcano cluster it is what the models read.
    # The rule keeps the cluster label (one rule serves a central store of many clusters); within one
    # cluster that is exactly the branch the models read.
    volcano = recording_rules()["queue_name:volcano_gpu_demand:gpus"].strip()
    branch = queries.volcano_queue_gpus("request")
    assert volcano == branch.replace(f"sum by ({queries.QUEUE_LABEL})", f"sum by (cluster, {queries.QUEUE_LABEL})", 1)
    assert queries.QUEUE_DEMAND.startswith(f"{branch} or ")


def test_rightsize_builders_escape_and_share_the_request_selector() -> None:
    assert queries.KSM_GPU_REQUESTS.metric == REQUESTS
    assert queries.fresh_pod_samples("DCGM_FI_DEV_GPU_UTIL", 300) == (
        'DCGM_FI_DEV_GPU_UTIL{pod!=""} and (timestamp(DCGM_FI_DEV_GPU_UTIL{pod!=""}) > time() - 300)'
    )
    assert queries.per_pod_max(Selector.of("kube_pod_labels", namespace='a"b'), 3600) == (
        'max_over_time(kube_pod_labels{namespace="a\\"b"}[3600s])'
    )
    assert queries.series_count("DCGM_FI_DEV_GPU_UTIL") == "count(DCGM_FI_DEV_GPU_UTIL)"


# --- against a real Prometheus ----------------------------------------------------------------------------

START = pd.Timestamp("2026-01-05T00:00Z")
VOLCANO_ONLY = "volcano_queue_request_scalar_resources"
KSM_ONLY = "kube_pod_container_resource_requests,kube_pod_status_phase,kube_pod_labels"


@dataclass
class Histories:
    volcano: LocalPrometheus
    ksm: LocalPrometheus
    queues: list[str]
    start: pd.Timestamp
    end: pd.Timestamp


@pytest.fixture(scope="module")
def histories(
    prometheus_from_openmetrics: Callable[[Path], LocalPrometheus], tmp_path_factory: pytest.TempPathFactory
) -> Histories:
    """One simulated cluster written twice: once with only Volcano's gauge, once with only kube-state-metrics."""
    jobs = sim.synthetic_jobs(START - pd.Timedelta(days=1), START + pd.Timedelta(days=3), seed=7, jobs_per_hour=12)
    # Samples 10 min apart, more than Prometheus' 5 min lookback: backfilled series carry no staleness
    # markers and the simulator exports only a pod's current phase, so at finer steps a pod that just started
    # would still show its Pending series too (real kube-state-metrics exports every phase as 0/1).
    settings = sim.SimSettings(start=START, weeks=2 / 7, step_s=600, seed=7, metrics="core", warmup_days=1)
    result = sim.simulate(jobs, sim.ClusterSpec.uniform(3), settings)
    out = tmp_path_factory.mktemp("queries")
    servers = {}
    for name, families in (("volcano", VOLCANO_ONLY), ("ksm", KSM_ONLY)):
        path = out / f"{name}.om"
        sim.write_openmetrics(path, result.families(families), result.grid)
        servers[name] = prometheus_from_openmetrics(path)
    end = START + pd.Timedelta(days=2) - pd.Timedelta(hours=1)
    return Histories(
        servers["volcano"], servers["ksm"], sorted(q.name for q in result.queues), START + pd.Timedelta(hours=6), end
    )


def _per_queue(prom: LocalPrometheus, h: Histories) -> pd.DataFrame:
    source = PrometheusSource(PrometheusSettings(url=prom.url))  # type: ignore[call-arg]
    frame = source.query_range(queries.QUEUE_DEMAND, h.start, h.end, pd.Timedelta("1h"))
    assert not frame.empty
    assert set(frame.columns) >= {"series_id", "timestamp", "value", "queue_name"}
    assert frame["series_id"].nunique() == frame["queue_name"].nunique(), "a queue answered by two series"
    assert not frame.duplicated(["queue_name", "timestamp"]).any()
    return frame


@pytest.mark.slow
def test_queue_demand_gives_one_series_per_queue_with_or_without_volcano(histories: Histories) -> None:
    volcano = _per_queue(histories.volcano, histories)
    ksm = _per_queue(histories.ksm, histories)
    assert sorted(volcano["queue_name"].unique()) == histories.queues
    # Every queue has pods at some point of this window, so pod requests name every queue too.
    assert sorted(ksm["queue_name"].unique()) == histories.queues
    # Pod requests exist only while a queue has pods: kube-state-metrics answers exactly where Volcano's
    # demand is not zero, with the same number.
    busy = volcano[volcano["value"] > 0]
    joined = busy.merge(ksm, on=["queue_name", "timestamp"], how="outer", suffixes=("_volcano", "_ksm"))
    assert len(joined) == len(busy) == len(ksm)
    assert (joined["value_volcano"] - joined["value_ksm"]).abs().max() < 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("which", ["volcano", "ksm"])
def test_training_and_the_loop_read_the_same_queue_history(histories: Histories, which: str) -> None:
    prom: LocalPrometheus = getattr(histories, which)
    settings = Settings(prometheus=PrometheusSettings(url=prom.url))  # type: ignore[call-arg]
    trained = load_prometheus_history(
        settings, family="queue", start=histories.end - pd.Timedelta(days=1), end=histories.end, step="1h"
    )
    served = SourceHistory(PrometheusSource(settings.prometheus), lookback_h=24).history(histories.end)
    cols = ["series_id", "timestamp", "value"]
    a = trained[cols].sort_values(cols[:2]).reset_index(drop=True)
    b = served[cols].sort_values(cols[:2]).reset_index(drop=True)
    assert set(a["series_id"]) <= set(histories.queues)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)


def _openmetrics(families: dict[str, list[tuple[str, list[tuple[int, float]]]]]) -> str:
    lines = []
    for name, series in families.items():
        lines.append(f"# TYPE {name} gauge")
        for labels, samples in series:
            lines += [f"{name}{{{labels}}} {value} {ts}" for ts, value in samples]
    return "\n".join([*lines, "# EOF", ""])


@pytest.mark.slow
def test_ksm_fallback_survives_overlapping_phases_and_ignores_pods_without_a_queue(
    prometheus_from_openmetrics: Callable[[Path], LocalPrometheus], tmp_path: Path
) -> None:
    """Pod `a` (queue q1) was Pending and is Running within the 5 min lookback (no staleness markers in
    backfilled data): one series per pod on the phase side, not a many-to-many 422. Pod `b` has a GPU
    request but no queue label: it belongs to no queue, so it makes no series (not one named "nan")."""
    t0 = int(START.timestamp())
    minutes = [t0 + 60 * i for i in range(30)]
    pod_a, pod_b = 'namespace="ns",pod="a"', 'namespace="ns",pod="b"'
    text = _openmetrics(
        {
            "kube_pod_container_resource_requests": [
                (f'{pod_a},resource="nvidia_com_gpu"', [(t, 4.0) for t in minutes]),
                (f'{pod_b},resource="nvidia_com_gpu"', [(t, 2.0) for t in minutes]),
            ],
            "kube_pod_status_phase": [
                (f'{pod_a},phase="Pending"', [(t, 1.0) for t in minutes[:10]]),
                (f'{pod_a},phase="Running"', [(t, 1.0) for t in minutes[10:]]),
                (f'{pod_b},phase="Running"', [(t, 1.0) for t in minutes]),
            ],
            "kube_pod_labels": [
                (f'{pod_a},label_volcano_sh_queue_name="q1"', [(t, 1.0) for t in minutes]),
                (pod_b, [(t, 1.0) for t in minutes]),
            ],
        }
    )
    path = tmp_path / "ksm.om"
    path.write_text(text, encoding="utf-8")
    prom = prometheus_from_openmetrics(path)
    source = PrometheusSource(PrometheusSettings(url=prom.url))  # type: ignore[call-arg]
    frame = source.query_range(queries.QUEUE_DEMAND, START, START + pd.Timedelta(minutes=29), pd.Timedelta("1min"))
    assert sorted(frame["queue_name"].unique()) == ["q1"]
    assert (frame["value"] == 4.0).all() and len(frame) == 30
    cluster = source.query_range(queries.CLUSTER_DEMAND, START, START + pd.Timedelta(minutes=29), pd.Timedelta("1min"))
    assert (cluster["value"] == 6.0).all()


@pytest.mark.slow
def test_queue_pending_with_or_without_volcano_and_zero_only_where_pods_are_seen(
    prometheus_from_openmetrics: Callable[[Path], LocalPrometheus], tmp_path: Path
) -> None:
    """Pending GPUs per queue (the demand model's job input): Volcano's request − allocated where it is
    exported; else kube-state-metrics Pending pods, 0 for a queue whose pods all run, and no series at all
    (unknown, not 0) for a queue nobody reports."""
    t0 = int(START.timestamp())
    minutes = [t0 + 60 * i for i in range(30)]
    pod_a = 'namespace="ns",pod="a"'
    gpu = 'resource="nvidia.com/gpu"'
    text = _openmetrics(
        {
            "volcano_queue_request_scalar_resources": [(f'queue_name="v1",{gpu}', [(t, 6000.0) for t in minutes])],
            "volcano_queue_allocated_scalar_resources": [(f'queue_name="v1",{gpu}', [(t, 4000.0) for t in minutes])],
            "kube_pod_container_resource_requests": [
                (f'{pod_a},resource="nvidia_com_gpu"', [(t, 4.0) for t in minutes])
            ],
            "kube_pod_status_phase": [
                (f'{pod_a},phase="Pending"', [(t, 1.0) for t in minutes[:10]]),
                (f'{pod_a},phase="Running"', [(t, 1.0) for t in minutes[10:]]),
            ],
            "kube_pod_labels": [(f'{pod_a},label_volcano_sh_queue_name="k1"', [(t, 1.0) for t in minutes])],
        }
    )
    path = tmp_path / "pending.om"
    path.write_text(text, encoding="utf-8")
    prom = prometheus_from_openmetrics(path)
    source = PrometheusSource(PrometheusSettings(url=prom.url))  # type: ignore[call-arg]
    frame = source.query_range(queries.QUEUE_PENDING, START, START + pd.Timedelta(minutes=29), pd.Timedelta("1min"))
    assert sorted(frame["queue_name"].unique()) == ["k1", "v1"]
    assert not frame.duplicated(["queue_name", "timestamp"]).any()
    v1 = frame[frame["queue_name"] == "v1"]
    assert (v1["value"] == 2.0).all() and len(v1) == 30
    k1 = frame[frame["queue_name"] == "k1"].set_index("timestamp")["value"]
    minute = (k1.index - START) // pd.Timedelta("1min")
    assert (k1[minute < 10] == 4.0).all()
    # Past the 5 min lookback of the last Pending sample the pod only runs: an explicit 0, not a gap.
    assert (k1[minute >= 15] == 0.0).all() and (minute >= 15).sum() == 15
