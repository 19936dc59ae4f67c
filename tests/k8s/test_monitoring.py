"""The PrometheusRule and the Grafana dashboard against a real Prometheus holding simulated history.

The Prometheus is backfilled (promtool) with a small simulator run (3 nodes of 8 GPUs, 2 days, 5-minute
step: DCGM, Volcano queues, kube-state-metrics, node_exporter under their real names) plus a small
OpenMetrics file of the project's own ``predictor_*`` series (``tests/k8s/project_metrics.py``), which
no simulator produces, using the names in ``k8s/METRICS.md``. Every expression of every rule, panel and
dashboard variable must return data, and each alert must fire in its incident and stay quiet outside it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import requests

from predictor import sim
from tests.k8s.project_metrics import HOUR, SimHistory, combine, project_openmetrics, read_sim_history
from tests.k8s.promql import Query, dashboard_queries, rule_groups, rule_queries, write_rule_file
from tests.support.localprom import LocalPrometheus

START = pd.Timestamp("2026-03-02", tz="UTC")
ALL_QUERIES = [
    q
    for q in (*rule_queries(), *dashboard_queries())
    if q.where.removeprefix("alert ") not in {"GpuThermalThrottling", "GpuPowerCapped", "RocePfcPauseStorm"}
]


def test_promtool_checks_the_rules(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package 'prometheus')")
    rules = write_rule_file(tmp_path / "rules.yaml")
    done = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    n_rules = sum(len(g["rules"]) for g in rule_groups())
    assert f"SUCCESS: {n_rules} rules found" in done.stdout


def test_the_project_alerts_are_all_there() -> None:
    alerts = {r["alert"] for g in rule_groups() for r in g["rules"] if "alert" in r}
    assert {
        "PredictorLoopStale",
        "PredictorPlansHeldLong",
        "PredictorForecastErrorHigh",
        "PredictorDemandAboveForecastBand",
        "PredictorDemandBelowForecastBand",
    } <= alerts
    for group in rule_groups():
        for rule in group["rules"]:
            if "alert" in rule:
                assert rule["labels"]["severity"] in {"info", "warning", "critical"}
                assert rule["annotations"]["summary"]


@pytest.fixture(scope="module")
def history_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SimHistory]:
    jobs = sim.synthetic_jobs(START - pd.Timedelta(days=1), START + pd.Timedelta(days=2), seed=7, jobs_per_hour=25)
    settings = sim.SimSettings(start=START, weeks=2 / 7, step_s=300, seed=7, fault_rate_per_day=4, warmup_days=1)
    result = sim.simulate(jobs, sim.ClusterSpec.uniform(3), settings)
    out = tmp_path_factory.mktemp("k8s-sim")
    result.write(out, openmetrics=True, parquet=False)
    history = read_sim_history(out / "metrics.om")
    return combine(out / "metrics.om", history, out / "combined.om"), history


@pytest.fixture(scope="module")
def prom(
    prometheus_from_openmetrics: Callable[[Path], LocalPrometheus], history_file: tuple[Path, SimHistory]
) -> LocalPrometheus:
    return prometheus_from_openmetrics(history_file[0])


def _query(prom: LocalPrometheus, path: str, **params: Any) -> list[dict[str, Any]]:
    response = requests.get(f"{prom.url}/api/v1/{path}", params=params, timeout=60)
    body = response.json()
    assert response.status_code == 200 and body["status"] == "success", f"{params['query']}: {body}"
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


@pytest.mark.slow
@pytest.mark.parametrize("query", ALL_QUERIES, ids=[q.where for q in ALL_QUERIES])
def test_every_query_returns_data(prom: LocalPrometheus, history_file: tuple[Path, SimHistory], query: Query) -> None:
    grid = history_file[1].grid
    result = _query(prom, "query_range", query=query.expr, start=grid[0], end=grid[-1], step="15m")
    assert result, f"{query.where} returned no data over the simulated history:\n{query.expr}"
    assert any(len(series["values"]) for series in result)


# alert -> (an hour of the history where it must fire, one where it must not); see project_metrics.py
INCIDENTS = {
    "PredictorLoopStale": (33, 10),
    "PredictorLoopCyclesFailing": (33, 10),
    "PredictorPlansHeldLong": (20, 8),
    "PredictorQueuePatchesFailing": (40.5, 10),
    "PredictorModelTooOld": (30, 10),
    "PredictorModelLoadFailing": (45, 10),
    "PredictorForecastErrorHigh": (47, 20),
    "PredictorDemandAboveForecastBand": (30, 12),
    "PredictorDemandBelowForecastBand": (42, 12),
    "PredictorQueueDemandAnomalyHigh": (30, 12),
    "PredictorQueueDemandAnomalyLow": (42, 12),
    "PredictorRootCauseFinding": (37, 10),
    # From the simulator's faults table of this history (seed 7): roce_congestion on node-000 from hour
    # 33.5 to 34.9, nic_link_flap on node-002 from hour 30.46 to 31.08.
    "RoceEcnCongestion": (34.5, 10),
    "NicLinkFlapping": (31, 10),
}
# Alerts whose incident this short history does not hold (no thermal, power-cap or PFC-storm fault in it):
# promtool's rule unit tests feed them crafted series instead (test_signal_alerts_with_promtool).
NO_INCIDENT_HERE = {"GpuThermalThrottling", "GpuPowerCapped", "RocePfcPauseStorm"}


@pytest.mark.slow
@pytest.mark.parametrize("alert", sorted(INCIDENTS))
def test_alert_fires_in_its_incident_only(
    prom: LocalPrometheus, history_file: tuple[Path, SimHistory], alert: str
) -> None:
    grid = history_file[1].grid
    expr = next(q.expr for q in rule_queries() if q.where == f"alert {alert}")
    firing, quiet = INCIDENTS[alert]
    assert _query(prom, "query", query=expr, time=grid[0] + firing * HOUR), f"{alert} does not fire at hour {firing}"
    assert not _query(prom, "query", query=expr, time=grid[0] + quiet * HOUR), f"{alert} fires at hour {quiet}"


def test_every_alert_has_an_incident() -> None:
    alerts = {r["alert"] for g in rule_groups() for r in g["rules"] if "alert" in r}
    assert alerts == set(INCIDENTS) | NO_INCIDENT_HERE


_SIGNAL_TEST = """
rule_files: [{rules}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'DCGM_FI_DEV_GPU_TEMP{{Hostname="n1",gpu="3"}}'
        values: '70x30 92x40'
      - series: 'DCGM_FI_DEV_GPU_TEMP{{Hostname="n1",gpu="4"}}'
        values: '70x70'
      - series: 'DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{{Hostname="n1",gpu="5"}}'
        values: '0x30 4x40'
      - series: 'DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{{Hostname="n1",gpu="6"}}'
        values: '0x30 32x40'
      - series: 'node_ethtool_rx_prio3_pause{{node="n1"}}'
        values: '0+60x80 4800+60000x40'
      - series: 'node_ethtool_tx_prio3_pause{{node="n1"}}'
        values: '0+60x120'
    alert_rule_test:
      - {{eval_time: 25m, alertname: GpuThermalThrottling, exp_alerts: []}}
      - eval_time: 60m
        alertname: GpuThermalThrottling
        exp_alerts:
          - exp_labels: {{severity: warning, Hostname: n1, gpu: "3"}}
            exp_annotations:
              summary: GPU 3 on n1 averages 92 °C (throttles near 85-90 °C).
              description: Check the node's cooling and fans; drain it or lower its power cap until fixed.
      - {{eval_time: 25m, alertname: GpuPowerCapped, exp_alerts: []}}
      - eval_time: 50m
        alertname: GpuPowerCapped
        exp_alerts:
          - exp_labels: {{severity: warning, Hostname: n1, gpu: "5"}}
            exp_annotations:
              summary: GPU 5 on n1 has been held at its power cap for 15 minutes.
              description: Check the configured power limit (nvidia-smi -q -d POWER), the rack's power budget and PSUs.
      - {{eval_time: 75m, alertname: RocePfcPauseStorm, exp_alerts: []}}
      - eval_time: 100m
        alertname: RocePfcPauseStorm
        exp_alerts:
          - exp_labels: {{severity: warning, node: n1}}
            exp_annotations:
              summary: PFC pause frames on n1 at 1.001k/s, ten times their usual rate.
              description: Find the pausing port, check the switch's PFC watchdog and the ECN thresholds.
"""


def test_signal_alerts_with_promtool(tmp_path: Path) -> None:
    # The alerts on root-cause signals this history has no incident for: quiet on normal series, firing
    # on a hot GPU, a power-capped GPU (a thermal-capped one does not count) and a pause-frame storm.
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package 'prometheus')")
    rules = write_rule_file(tmp_path / "rules.yaml")
    test = tmp_path / "test.yaml"
    test.write_text(_SIGNAL_TEST.format(rules=rules))
    done = subprocess.run([promtool, "test", "rules", str(test)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_plans_held_alert_ignores_the_dead_band(prom: LocalPrometheus, history_file: tuple[Path, SimHistory]) -> None:
    expr = next(q.expr for q in rule_queries() if q.where == "alert PredictorPlansHeldLong")
    result = _query(prom, "query", query=expr, time=history_file[1].grid[0] + 20 * HOUR)
    assert {s["metric"]["reason"] for s in result} == {"cooldown"}


@pytest.mark.slow
def test_job_pod_node_table_maps_running_gpu_pods(prom: LocalPrometheus, history_file: tuple[Path, SimHistory]) -> None:
    grid = history_file[1].grid
    expr = next(q.expr for q in dashboard_queries() if q.where.startswith("panel 'Job → pod → node"))
    rows = _query(prom, "query", query=expr, time=grid[len(grid) // 2])
    assert rows
    for row in rows:
        labels = row["metric"]
        assert {"label_volcano_sh_job_name", "label_volcano_sh_queue_name", "pod", "node"} <= set(labels)
        assert labels["node"] in history_file[1].nodes
        assert float(row["value"][1]) >= 1


def _families(openmetrics: str) -> dict[str, set[str]]:
    """Family name -> label names, from OpenMetrics text."""
    families: dict[str, set[str]] = {}
    current = ""
    for line in openmetrics.splitlines():
        if line.startswith("# TYPE "):
            current = line.split()[2]
            families[current] = set()
        elif line and not line.startswith("#"):
            families[current] |= set(re.findall(r'(\w+)="', line.split("}", 1)[0]))
    return families


LOOP_PREFIXES = ("predictor_loop_", "predictor_rca_")  # what LoopMetrics exports (predictor/loop/metrics.py)


def test_loop_metric_names_match_the_loop_code() -> None:
    """The rules, the dashboard and the synthetic series use the names and labels the loop exports."""
    metrics = pytest.importorskip("predictor.loop.metrics")
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics import MetricWrapperBase

    loop = metrics.LoopMetrics(CollectorRegistry())
    exported = {m._name: set(m._labelnames) for m in vars(loop).values() if isinstance(m, MetricWrapperBase)}
    history = SimHistory({"q": [(0, 1.0), (300, 2.0)]}, ["node-000"])
    synthetic = {k: v for k, v in _families(project_openmetrics(history)).items() if k.startswith(LOOP_PREFIXES)}
    assert synthetic == exported
    used = {
        re.sub(r"_total$", "", name) for q in ALL_QUERIES for name in re.findall(r"predictor_(?:loop|rca)_\w+", q.expr)
    }
    assert used <= set(exported), f"queries use names the loop does not export: {used - set(exported)}"


def test_band_metric_names_match_the_diagnose_code() -> None:
    bands = pytest.importorskip("predictor.diagnose.bands")
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    forecast = pd.DataFrame(
        {"series_id": ["cluster"], "timestamp": [pd.Timestamp("2026-03-02", tz="UTC")], "lo-80": [1.0], "hi-80": [2.0]}
    )
    bands.export_forecast_bands(registry, forecast, level=80, at=pd.Timestamp("2026-03-02", tz="UTC"))
    exported = {(m.name, frozenset(s.labels)) for m in registry.collect() for s in m.samples}
    assert exported == {(bands.UPPER, frozenset({"series", "level"})), (bands.LOWER, frozenset({"series", "level"}))}
    history = SimHistory({"q": [(0, 1.0), (300, 2.0)]}, ["node-000"])
    synthetic = _families(project_openmetrics(history))
    assert synthetic[bands.UPPER] == synthetic[bands.LOWER] == {"series", "level"}
    used = {name for q in ALL_QUERIES for name in re.findall(r"predictor_forecast_\w+", q.expr)}
    assert used == {bands.UPPER, bands.LOWER}
