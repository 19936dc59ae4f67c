"""The demand model served from real Prometheus series: queue demand and pending jobs through the catalogue.

A simulated Volcano cluster (request and allocated gauges only) is backfilled into a real Prometheus; the
``gpu-demand`` champion in a sqlite MLflow is served by ``predictor demand`` and by a loop cycle wired as
production wires it (``SourceHistory`` + ``SourceJobs`` + ``RegistryDemand``), with no refit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from predictor import sim
from predictor.actuators.audit import AuditLog
from predictor.cli import main
from predictor.config import PrometheusSettings, load_settings
from predictor.loop import FileCluster, Loop, SourceHistory
from predictor.loop.demand import RegistryDemand, SourceJobs
from predictor.registry import DEMAND_FAMILY, ModelRegistry
from predictor.sources import PrometheusSource, queries
from tests.loop.test_demand import _fitted_demand_model
from tests.support.actuators import resizing
from tests.support.localprom import LocalPrometheus

pytestmark = pytest.mark.slow

START = pd.Timestamp("2026-03-02T00:00:00Z")
DAYS = 9  # more than the week of hourly history the queue regressor needs
FAMILIES = "volcano_queue_request_scalar_resources,volcano_queue_allocated_scalar_resources"


@pytest.fixture(scope="module")
def volcano(
    prometheus_from_openmetrics: Callable[[Path], LocalPrometheus], tmp_path_factory: pytest.TempPathFactory
) -> tuple[LocalPrometheus, list[str], pd.Timestamp]:
    jobs = sim.synthetic_jobs(START - pd.Timedelta(days=1), START + pd.Timedelta(days=DAYS), seed=5, jobs_per_hour=10)
    # 5 min samples: Prometheus' 5 min lookback then finds one at any query time.
    settings = sim.SimSettings(start=START, weeks=DAYS / 7, step_s=300, seed=5, metrics="core", warmup_days=1)
    result = sim.simulate(jobs, sim.ClusterSpec.uniform(3), settings)
    path = tmp_path_factory.mktemp("demand-prom") / "volcano.om"
    sim.write_openmetrics(path, result.families(FAMILIES), result.grid)
    end = START + pd.Timedelta(days=DAYS) - pd.Timedelta(hours=1)
    return prometheus_from_openmetrics(path), sorted(q.name for q in result.queues), end


@pytest.fixture
def champion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PREDICTOR_MLFLOW__TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    registry = ModelRegistry(load_settings(None).mlflow)
    info = registry.log_model(DEMAND_FAMILY, _fitted_demand_model(), kind="tabular")
    registry.promote(DEMAND_FAMILY, info.version)
    return info.version


def test_predictor_demand_and_a_loop_cycle_serve_the_champion_from_prometheus(
    volcano: tuple[LocalPrometheus, list[str], pd.Timestamp],
    champion: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prom, queues, end = volcano
    monkeypatch.setenv("PREDICTOR_PROMETHEUS__URL", prom.url)
    out = tmp_path / "demand.csv"
    assert main(["demand", "--now", end.isoformat(), "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert sorted(frame["queue"]) == queues  # every Volcano queue has a pending series (request − allocated)
    assert (frame["model"] == f"models:/gpu-demand/{champion}").all() and (frame["peak"] >= frame["now"]).all()
    # `now` is the queue's demand (running + pending) in the newest hour, as the catalogue's query reads it.
    source = PrometheusSource(PrometheusSettings(url=prom.url))  # type: ignore[call-arg]
    demand = source.query_range(queries.QUEUE_DEMAND, end - pd.Timedelta(hours=1), end, pd.Timedelta("5min"))
    newest = demand[pd.to_datetime(demand["timestamp"], utc=True) >= end.floor("h")]
    expected = newest.groupby("queue_name")["value"].max()
    assert dict(zip(frame["queue"], frame["now"], strict=True)) == pytest.approx(expected.to_dict())

    settings = load_settings(
        None,
        actuators={**resizing("plan"), "audit_log": tmp_path / "audit.jsonl", "plan_dir": tmp_path / "plans"},
        planner={"max_step_abs": 1000, "max_step_rel": 10},
    )
    items = [
        {
            "metadata": {"name": q, "annotations": {}},
            "spec": {"deserved": {"nvidia.com/gpu": "4"}, "capability": {"nvidia.com/gpu": "8"}},
        }
        for q in queues
    ]
    nodes = {
        "items": [
            {
                "metadata": {"name": f"n{i}"},
                "status": {"allocatable": {"nvidia.com/gpu": "8"}, "conditions": [{"type": "Ready", "status": "True"}]},
            }
            for i in range(60)
        ]
    }  # room for every queue's demand: no Σ deserved scaling

    class Level:
        def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
            rows = [
                {
                    "series_id": q,
                    "timestamp": end + pd.Timedelta(hours=h),
                    "mean": 1.0,
                    "lo-80": 0.0,
                    "hi-80": 1.0,
                    "lo-95": 0.0,
                    "hi-95": 2.0,
                }
                for q in queues
                for h in range(horizon)
            ]
            return pd.DataFrame(rows), {"gpu-forecast": "4"}

    loop = Loop(
        settings,
        cluster=FileCluster(items, nodes),
        history=SourceHistory(source),
        forecaster=Level(),
        clock=lambda: end,
        demand=RegistryDemand(ModelRegistry(settings.mlflow), SourceJobs(source)),
    )
    report = loop.run_once(force=True)
    assert report.hold is None and report.plan is not None
    served = {"gpu-demand": f"models:/gpu-demand/{champion}", "gpu-forecast": "models:/gpu-forecast/4"}
    assert json.loads((tmp_path / "plans" / "plan.json").read_text())["models"] == served
    done = [r for r in AuditLog(tmp_path / "audit.jsonl").read() if r["outcome"] == "cycle-done"]
    assert done[-1]["models"] == served
    # Where the queue's jobs ask for more than the (deliberately low) forecast, demand set its deserved.
    busy = frame.loc[frame["peak"] > 1.0, "queue"].tolist()
    deserved = {c.queue: c for c in report.plan.changes if c.field == "deserved"}
    assert busy and all(deserved[q].code == "demand" for q in busy if q in deserved)
    assert any(q in deserved for q in busy)


def test_train_demand_fits_the_queue_regressor_on_the_loops_own_queue_series(
    volcano: tuple[LocalPrometheus, list[str], pd.Timestamp],
) -> None:
    """Trained on what it is served on: QUEUE_DEMAND and QUEUE_PENDING, hourly, not the runs' requests."""
    from models.demand_eval import RunDemandModel
    from predictor.commands.rightsize import _queue_hours

    prom, queues, end = volcano
    settings = load_settings(None, prometheus={"url": prom.url})
    hours = _queue_hours(settings, (end - pd.Timedelta(days=DAYS - 1)).isoformat(), end.isoformat())
    assert hours is not None and sorted(hours["series_id"].unique()) == queues
    assert {"demand", "pending"} <= set(hours.columns) and hours["pending"].notna().any()
    source = PrometheusSource(PrometheusSettings(url=prom.url))  # type: ignore[call-arg]
    direct = source.query_range(queries.QUEUE_DEMAND, end - pd.Timedelta(hours=1), end, pd.Timedelta(hours=1))
    last = hours[hours["timestamp"] == hours["timestamp"].max()].set_index("series_id")["demand"]
    assert last.to_dict() == pytest.approx(
        direct[direct["timestamp"] == direct["timestamp"].max()].set_index("queue_name")["value"].to_dict()
    )
    model = RunDemandModel(max_iter=20).fit_queues(hours)
    assert model.queue_model_ is not None
    assert not model.predict_queues(hours).empty
