"""``predictor train forecast`` reading queue demand from a real Prometheus (simulated, backfilled history).

The default queue PromQL sums ``volcano_queue_request_scalar_resources`` (milli-GPUs) per queue; the
registered forecaster must then forecast one series per Volcano queue, named after the queue, which is
how the planner joins forecasts to Queue objects.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from predictor import sim
from predictor.cli import main
from predictor.config import MlflowSettings
from predictor.registry import CHAMPION, ModelRegistry
from tests.support.localprom import LocalPrometheus


@pytest.fixture(scope="module")
def recent_history(
    prometheus_from_openmetrics: Callable[[Path], LocalPrometheus], tmp_path_factory: pytest.TempPathFactory
) -> tuple[LocalPrometheus, list[str]]:
    # The command reads the last --days up to now, so the simulated weeks end a few hours ago.
    start = (pd.Timestamp.now(tz="UTC") - pd.Timedelta(days=15)).floor("h")
    jobs = sim.synthetic_jobs(start - pd.Timedelta(days=1), start + pd.Timedelta(days=15), seed=3, jobs_per_hour=12)
    settings = sim.SimSettings(start=start, weeks=2, step_s=3600, seed=3, metrics="core", warmup_days=1)
    result = sim.simulate(jobs, sim.ClusterSpec.uniform(4), settings)
    out = tmp_path_factory.mktemp("sim-forecast")
    result.write(out, openmetrics=True, parquet=False)
    queues = sorted({q.name for q in result.queues})
    return prometheus_from_openmetrics(out / "metrics.om"), queues


@pytest.mark.slow
def test_train_forecast_from_prometheus_registers_one_series_per_queue(
    recent_history: tuple[LocalPrometheus, list[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    prom, queues = recent_history
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is ./mlruns
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("PREDICTOR_PROMETHEUS__URL", prom.url)
    rc = main(
        [
            "train",
            "forecast",
            "--family",
            "queue",
            "--days",
            "14",
            "--model",
            "naive",
            "--horizon",
            "24",
            "--windows",
            "2",
            "--tracking-uri",
            tracking,
        ]
    )
    assert rc == 0, capsys.readouterr().err
    assert "promoted to champion" in capsys.readouterr().out
    registry = ModelRegistry(MlflowSettings(tracking_uri=tracking))
    assert registry.get("gpu-forecast", CHAMPION) is not None
    forecast = registry.load("gpu-forecast", CHAMPION).predict(pd.DataFrame({"horizon": [24]}))
    assert sorted(forecast["series_id"].unique()) == queues
    assert (forecast.groupby("series_id").size() == 24).all()
    assert (forecast["mean"] >= 0).all()


@pytest.mark.slow
def test_kube_state_metrics_fallback_gives_the_same_queue_demand(
    recent_history: tuple[LocalPrometheus, list[str]],
) -> None:
    """Without Volcano's metrics the queue query falls back to pod requests; on the same cluster both agree."""
    from pipelines.forecast import DEFAULT_QUERIES
    from predictor.config import PrometheusSettings
    from predictor.sources import PrometheusSource

    prom, queues = recent_history
    volcano, fallback = DEFAULT_QUERIES["queue"].split(" or ", 1)
    source = PrometheusSource(PrometheusSettings(url=prom.url))  # type: ignore[call-arg]
    end = pd.Timestamp.now(tz="UTC").floor("h") - pd.Timedelta(hours=6)
    start = end - pd.Timedelta(days=3)
    a = source.query_range(volcano, start, end, pd.Timedelta("1h"))
    b = source.query_range(fallback, start, end, pd.Timedelta("1h"))
    assert set(b["queue_name"]) <= set(queues) and not b.empty
    joined = a.merge(b, on=["queue_name", "timestamp"], suffixes=("_volcano", "_ksm"))
    assert len(joined) > 0
    assert (joined["value_volcano"] - joined["value_ksm"]).abs().max() < 1e-6
