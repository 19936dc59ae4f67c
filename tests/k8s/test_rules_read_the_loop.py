"""The rules and panels against what the loop itself exports: no hand-written ``predictor_*`` series.

A real Prometheus holds simulated Volcano queue series (3 days, 5-minute step) plus one extra queue,
``steady``, at 10 GPUs with two injected anomalies: 0 GPUs from hour 30:10 to 32:10 and 60 GPUs from 40:10
to 42:10. The real loop (plan mode) runs hourly from hour 24 on an injected clock: it reads its history
from that Prometheus with the query catalogue, forecasts every queue with a real estimator (naive, the
last value with bands from its own past errors) and serves ``/metrics`` on 127.0.0.1, which Prometheus
scrapes. From hour 50 to 56 its history source is down (the loop holds every queue: stale loop, plans
held for long). It also serves a ``gpu-demand`` champion from a registry (``Champions``): v1, registered
30 days before hour 40 (past its maximum age from then on), and from hour 44 to 46 a v2 whose files fail
to load (the last good v1 keeps serving, the failed loads are counted). A live scrape stamps samples
with the wall clock, and the rules look back an hour (``offset 1h``) and 5 one-minute steps (k-of-n), so
the test also reads the loop's ``/metrics`` over HTTP after each
cycle and backfills that text, stamped with the cycle's clock every 5 minutes until the next cycle. Then
every rule and panel query that reads the loop's series (the PrometheusRule, the dashboard and
``examples/alerts/forecast-bands.yaml``; ``predictor_loop_*``, ``predictor_forecast_*``;
the ``predictor_xdp_*`` panels read the node agent, tested with synthetic series in test_monitoring.py)
must return data, the band alerts fire on ``steady``'s anomalies and not before, and the loop-health
alerts fire in the outage and not before.
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from models.forecast.registry import forecasters
from models.frames import ID, TIME, VALUE
from predictor import sim
from predictor.config import PrometheusSettings, load_settings
from predictor.errors import DataSourceError, RegistryError
from predictor.loop import FileCluster, Loop, LoopMetrics, MetricsServer
from predictor.loop.demand import FrameJobs, RegistryDemand
from predictor.loop.inputs import EstimatorForecaster, SourceHistory
from predictor.registry import DECISION_TAG, ModelVersionInfo
from predictor.registry.served import ServedModel
from predictor.sources.prometheus import PrometheusSource
from predictor.sources.promql import escape_label_value
from tests.actuators.fake_apiserver import queue_object
from tests.k8s.manifests import K8S
from tests.k8s.project_metrics import HOUR
from tests.k8s.promql import Query, dashboard_queries, inline_recordings, rule_queries
from tests.support.actuators import resizing
from tests.support.localprom import LocalPrometheus, backfill, prometheus_available

pytestmark = pytest.mark.slow

START = pd.Timestamp("2026-03-02", tz="UTC")
DAYS = 3
FIRST_CYCLE_H = 24
STEADY, STEADY_GPUS = "steady", 10.0
# (start hour, end hour, GPUs) of the injected anomalies in queue ``steady``
ANOMALIES = ((30 + 10 / 60, 32 + 10 / 60, 0.0), (40 + 10 / 60, 42 + 10 / 60, 60.0))
LOOP_SERIES = re.compile(r"predictor_(?:loop|forecast)_\w+")
EXAMPLE_RULES = K8S.parent / "examples" / "alerts" / "forecast-bands.yaml"


def _example_queries() -> list[Query]:
    """The alerts of ``examples/alerts/forecast-bands.yaml``, recording rules inlined."""
    rules = [r for g in yaml.safe_load(EXAMPLE_RULES.read_text(encoding="utf-8"))["groups"] for r in g["rules"]]
    recorded = {r["record"]: r["expr"] for r in rules if "record" in r}
    return [Query(f"alert {r['alert']}", inline_recordings(r["expr"].strip(), recorded)) for r in rules if "alert" in r]


QUERIES = [q for q in (*rule_queries(), *dashboard_queries(), *_example_queries()) if LOOP_SERIES.search(q.expr)]
# alert -> (hour where it fires for queue ``steady``, hour where it does not)
ANOMALY_ALERTS = {
    "PredictorQueueDemandAnomalyLow": (30.5, 29.5),
    "PredictorDemandBelowForecastBand": (30.5, 29.5),
    "PredictorQueueDemandAnomalyHigh": (40.5, 39.5),
    "PredictorDemandAboveForecastBand": (40.5, 39.5),
    "PredictorForecastErrorHigh": (42.0, 29.5),
    "GpuDemandBelowForecastBand": (30.5, 29.5),  # examples/alerts/forecast-bands.yaml
    "GpuDemandAboveForecastBand": (40.5, 39.5),
}
OUTAGE_H = range(50, 57)  # cycles whose history source is down
# alert -> (hour where it fires, hour where it does not), from the loop's own series during the outage
OUTAGE_ALERTS = {"PredictorLoopStale": (56.5, 49.5), "PredictorPlansHeldLong": (56.5, 49.5)}
# Alerts on failures plan mode cannot have (failed cycles, refused patches): every series and label they
# select must be exported, which the test checks instead.
HEALTH_ALERTS = {"PredictorLoopCyclesFailing", "PredictorQueuePatchesFailing"}
# alert -> (hour where it fires, hour where it does not), from the served demand model's lifecycle
LIFECYCLE_ALERTS = {"PredictorModelTooOld": (45.5, 35.5), "PredictorModelLoadFailing": (45.5, 35.5)}
TOO_OLD_H, BROKEN_H = 40, range(44, 46)


def _steady_gpus(hour: float) -> float:
    return next((gpus for start, end, gpus in ANOMALIES if start <= hour < end), STEADY_GPUS)


def _volcano_only(sim_file: Path, out: Path, grid: list[int]) -> list[str]:
    """The simulator's ``volcano_queue_*`` families, plus queue ``steady`` in the request family."""
    queues: set[str] = set()
    family = ""
    request = "volcano_queue_request_scalar_resources"
    labels = f'{{queue_name="{STEADY}",resource="nvidia.com/gpu"}}'
    steady = [f"{request}{labels} {_steady_gpus((t - grid[0]) / HOUR) * 1000!r} {t}" for t in grid]
    with sim_file.open(encoding="utf-8") as source, out.open("w", encoding="utf-8") as sink:
        for line in source:
            if line.startswith("# TYPE ") or line.startswith("# HELP "):
                if family == request and line.startswith("# TYPE "):
                    sink.write("\n".join(steady) + "\n")
                family = line.split()[2]
            if line.strip() == "# EOF":
                if family == request:
                    sink.write("\n".join(steady) + "\n")
                break
            if family.startswith("volcano_queue_"):
                sink.write(line)
                match = re.search(r'queue_name="([^"]+)"', line)
                if match:
                    queues.add(match.group(1))
        sink.write("# EOF\n")
    return sorted(queues | {STEADY})


def _grid(sim_file: Path) -> list[int]:
    stamps: set[int] = set()
    with sim_file.open(encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("volcano_queue_request_scalar_resources{"):
                stamps.add(int(line.rsplit(" ", 1)[1]))
    return sorted(stamps)


class Scrapes:
    """The loop's ``/metrics`` text, stamped: sample name, labels -> [(unix seconds, value)]."""

    def __init__(self) -> None:
        self.kinds: dict[str, str] = {}
        self.samples: dict[str, dict[tuple[tuple[str, str], ...], list[tuple[int, float]]]] = defaultdict(
            lambda: defaultdict(list)
        )

    def add(self, text: str, stamps: list[int]) -> None:
        for family in text_string_to_metric_families(text):
            self.kinds[family.name] = "counter" if family.type == "counter" else "gauge"
            for sample in family.samples:
                if sample.name.endswith("_created"):
                    continue
                for stamp in stamps:
                    self.samples[family.name][tuple(sorted(sample.labels.items()))].append((stamp, sample.value))

    def openmetrics(self) -> str:
        lines = []
        for name, series in sorted(self.samples.items()):
            kind = self.kinds[name]
            lines.append(f"# TYPE {name} {kind}")
            sample_name = f"{name}_total" if kind == "counter" else name
            for labels, points in sorted(series.items()):
                text = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels)
                lines.extend(f"{sample_name}{{{text}}} {value!r} {stamp}" for stamp, value in points)
        return "\n".join(lines) + "\n# EOF\n"


class Outage:
    """A history reader that is down during ``OUTAGE_H`` (the loop's clock), and the real one otherwise."""

    def __init__(self, history: SourceHistory) -> None:
        self.inner = history

    def history(self, now: pd.Timestamp) -> pd.DataFrame:
        if int((now - START) / pd.Timedelta(hours=1)) in OUTAGE_H:
            raise DataSourceError("prometheus: connection refused (injected outage)")
        return self.inner.history(now)


class Champions:
    """A ``ChampionRegistry`` of ``gpu-demand`` on the loop's clock (see the module docstring)."""

    def __init__(self, clock: dict[str, pd.Timestamp]) -> None:
        self.clock = clock

    def _version(self) -> str:
        return "2" if int((self.clock["now"] - START) / pd.Timedelta(hours=1)) in BROKEN_H else "1"

    def get(self, family: str) -> ModelVersionInfo:
        version = self._version()
        registered = START + pd.Timedelta(hours=TOO_OLD_H) - pd.Timedelta(days=30)
        if version == "2":
            registered = START + pd.Timedelta(hours=BROKEN_H.start)
        tags = {DECISION_TAG: "first" if version == "1" else "newer_data"}
        return ModelVersionInfo(family, version, "run", created_unix=registered.timestamp(), tags=tags)

    def load(self, family: str) -> ServedModel:
        if self._version() == "2":
            raise RegistryError(f"cannot load models:/{family}@champion: v2 fails its digest")
        return ServedModel(object(), kind="tabular", version="1")  # no pending jobs: never asked to predict


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as page:
        return str(page.read().decode())


def _query(prom: LocalPrometheus, path: str, **params: Any) -> list[dict[str, Any]]:
    response = requests.get(f"{prom.url}/api/v1/{path}", params=params, timeout=60)
    body = response.json()
    assert response.status_code == 200 and body["status"] == "success", f"{params['query']}: {body}"
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def _wait_for_scrape(prom: LocalPrometheus, timeout_s: float = 60.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        names = _query(prom, "query", query='count by (__name__) ({job="scraped", __name__=~"predictor_.+"})')
        if names:
            return names
        time.sleep(0.5)
    return []


_NO_JOBS = pd.DataFrame({ID: pd.Series(dtype=str), TIME: pd.Series(dtype="datetime64[ns, UTC]"), VALUE: []})


@pytest.fixture(scope="module")
def loop_prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalPrometheus, set[str]]]:
    """Prometheus with the source series and the loop's own exported series; yields it and the live-scraped names."""
    if not prometheus_available():
        pytest.skip("prometheus/promtool not installed (Debian package 'prometheus'); .ci/run installs it")
    work = tmp_path_factory.mktemp("rules-loop")
    jobs = sim.synthetic_jobs(START - pd.Timedelta(days=1), START + pd.Timedelta(days=DAYS), seed=7, jobs_per_hour=25)
    settings = sim.SimSettings(start=START, weeks=DAYS / 7, step_s=300, seed=7, warmup_days=1)
    sim.simulate(jobs, sim.ClusterSpec.uniform(3), settings).write(work / "sim", openmetrics=True, parquet=False)
    grid = _grid(work / "sim" / "metrics.om")
    queues = _volcano_only(work / "sim" / "metrics.om", work / "source.om", grid)
    tsdb = work / "tsdb"
    backfill(work / "source.om", tsdb)

    loop_settings = load_settings(
        None, actuators={**resizing("plan"), "audit_log": work / "audit.jsonl", "plan_dir": work / "plans"}
    )
    clock = {"now": START}
    metrics = LoopMetrics(wall=lambda: clock["now"].timestamp())  # model ages on the loop's clock
    cluster = FileCluster(
        [queue_object(q, deserved=8, capability=16, guarantee=0, allocated=4) for q in queues],
        {
            "items": [
                {"metadata": {"name": f"node-{i}"}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
                for i in range(3)
            ]
        },
    )
    scrapes = Scrapes()
    server = MetricsServer(metrics, 0, "127.0.0.1")
    with server, LocalPrometheus(tsdb, scrape=(f"127.0.0.1:{server.port}",)) as prom:
        history = SourceHistory(PrometheusSource(PrometheusSettings(url=prom.url)), lookback_h=DAYS * 24)
        loop = Loop(
            loop_settings,
            cluster=cluster,
            history=Outage(history),
            metrics=metrics,
            forecaster=EstimatorForecaster(forecasters.create("naive"), version="1"),
            demand=RegistryDemand(Champions(clock), FrameJobs(_NO_JOBS)),
            clock=lambda: clock["now"],
        )
        for hour in range(FIRST_CYCLE_H, DAYS * 24):
            clock["now"] = START + pd.Timedelta(hours=hour)
            loop.run_once()
            stamp = int(clock["now"].timestamp())
            scrapes.add(_get(f"http://127.0.0.1:{server.port}/metrics"), list(range(stamp, stamp + HOUR, 300)))
        scraped = {s["metric"]["__name__"] for s in _wait_for_scrape(prom)}
        loop.close()
    (work / "loop.om").write_text(scrapes.openmetrics(), encoding="utf-8")
    backfill(work / "loop.om", tsdb)
    with LocalPrometheus(tsdb) as prom:
        yield prom, scraped


def _window() -> dict[str, float]:
    start = START.timestamp() + FIRST_CYCLE_H * HOUR
    return {"start": start, "end": START.timestamp() + DAYS * 24 * HOUR - 300, "step": 900}


def test_a_live_scrape_of_the_loop_carries_the_series_the_rules_read(
    loop_prom: tuple[LocalPrometheus, set[str]],
) -> None:
    read = {name for q in QUERIES for name in LOOP_SERIES.findall(q.expr)}
    assert {"predictor_forecast_upper", "predictor_forecast_lower", "predictor_loop_forecast_gpus"} <= read
    assert read <= loop_prom[1], f"the loop's /metrics, scraped by Prometheus, lacks {read - loop_prom[1]}"


def _selectors(expr: str) -> list[tuple[str, set[str]]]:
    """Each loop-series selector of an expression: metric name and the label names it matches on."""
    out = []
    for match in re.finditer(r"(predictor_(?:loop|forecast)_\w+)(\{([^}]*)\})?", expr):
        labels = set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", match.group(3) or ""))
        out.append((match.group(1), labels))
    return out


@pytest.mark.parametrize("query", QUERIES, ids=[q.where for q in QUERIES])
def test_every_loop_query_reads_what_the_loop_exports(
    loop_prom: tuple[LocalPrometheus, set[str]], query: Query
) -> None:
    prom = loop_prom[0]
    name = query.where.removeprefix("alert ")
    if name in HEALTH_ALERTS:
        for metric, labels in _selectors(query.expr):
            by = ", ".join(sorted(labels))
            result = _query(prom, "query_range", query=f"count by ({by}) ({metric})", **_window())
            assert result, f"{query.where}: the loop exports no {metric}"
            assert all(labels <= set(s["metric"]) for s in result), f"{query.where}: {metric} lacks {labels}"
        return
    result = _query(prom, "query_range", query=query.expr, **_window())
    assert result and any(s["values"] for s in result), f"{query.where} returned no data:\n{query.expr}"


@pytest.mark.parametrize("alert", sorted(OUTAGE_ALERTS))
def test_loop_health_alerts_fire_in_the_outage_only(loop_prom: tuple[LocalPrometheus, set[str]], alert: str) -> None:
    prom = loop_prom[0]
    expr = next(q.expr for q in QUERIES if q.where == f"alert {alert}")
    firing, quiet = OUTAGE_ALERTS[alert]
    at = START.timestamp()
    assert _query(prom, "query", query=expr, time=at + firing * HOUR), f"{alert} does not fire at hour {firing}"
    assert not _query(prom, "query", query=expr, time=at + quiet * HOUR), f"{alert} fires at hour {quiet}"


@pytest.mark.parametrize("alert", sorted(LIFECYCLE_ALERTS))
def test_model_lifecycle_alerts_fire_when_the_served_model_ages_or_fails_to_load(
    loop_prom: tuple[LocalPrometheus, set[str]], alert: str
) -> None:
    prom = loop_prom[0]
    expr = next(q.expr for q in QUERIES if q.where == f"alert {alert}")
    firing, quiet = LIFECYCLE_ALERTS[alert]
    at = START.timestamp()
    fired = _query(prom, "query", query=expr, time=at + firing * HOUR)
    assert [s["metric"]["family"] for s in fired] == ["gpu-demand"], f"{alert} does not fire at hour {firing}"
    assert not _query(prom, "query", query=expr, time=at + quiet * HOUR), f"{alert} fires at hour {quiet}"


@pytest.mark.parametrize("alert", sorted(ANOMALY_ALERTS))
def test_band_alerts_fire_on_the_injected_anomaly_only(loop_prom: tuple[LocalPrometheus, set[str]], alert: str) -> None:
    prom = loop_prom[0]
    expr = next(q.expr for q in QUERIES if q.where == f"alert {alert}")
    firing, quiet = ANOMALY_ALERTS[alert]

    def steady_fires(hour: float) -> bool:
        result = _query(prom, "query", query=expr, time=START.timestamp() + hour * HOUR)
        return any(s["metric"].get("queue_name") == STEADY for s in result)

    assert steady_fires(firing), f"{alert} does not fire for queue {STEADY} at hour {firing}"
    assert not steady_fires(quiet), f"{alert} fires for queue {STEADY} at hour {quiet}, before its anomaly"


def test_every_loop_alert_is_checked() -> None:
    alerts = {q.where.removeprefix("alert ") for q in QUERIES if q.where.startswith("alert ")}
    assert alerts == set(ANOMALY_ALERTS) | set(OUTAGE_ALERTS) | set(LIFECYCLE_ALERTS) | HEALTH_ALERTS
