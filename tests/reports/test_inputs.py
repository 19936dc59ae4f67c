"""Report inputs gathered from Prometheus equal those read from the simulator's files for the same run.

One small simulated cluster is written both as Parquet (``--history DIR``) and as OpenMetrics, which a
real ``prometheus`` serves after a promtool backfill; both builders must give the same hourly tables.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from predictor import sim
from predictor.cli import main
from predictor.config import PrometheusSettings
from predictor.errors import InputError
from predictor.reports.inputs import inputs_from_directory, inputs_from_prometheus
from tests.support.localprom import LocalPrometheus

pytestmark = pytest.mark.slow

METRICS = "volcano_queue_*,DCGM_FI_DEV_GPU_UTIL,kube_node_status_allocatable,kube_pod_labels"


def test_prometheus_and_files_agree(
    tmp_path: Path, prometheus_from_openmetrics: Callable[[Path], LocalPrometheus]
) -> None:
    start = pd.Timestamp("2026-01-05T00:00Z")
    settings = sim.SimSettings(start=start, weeks=1.2, step_s=300, seed=5, metrics=METRICS)
    jobs = sim.synthetic_jobs(start - pd.Timedelta(days=3), start + pd.Timedelta(weeks=2), seed=5, jobs_per_hour=1)
    sim.simulate(jobs, sim.ClusterSpec.uniform(2), settings).write(tmp_path, openmetrics=True)
    files = inputs_from_directory(tmp_path)
    server = prometheus_from_openmetrics(tmp_path / "metrics.om")
    days = 9
    remote = inputs_from_prometheus(
        PrometheusSettings(url=server.url), end=files.as_of + pd.Timedelta(minutes=55), days=days
    )
    assert remote.total_gpus == files.total_gpus == 16
    pd.testing.assert_frame_equal(remote.quotas, files.quotas)
    for name in ("allocated", "demand", "used"):
        a, b = getattr(files, name), getattr(remote, name)
        merged = a.merge(b, on=["series_id", "timestamp"], suffixes=("_files", "_prom"))
        assert len(merged) >= 0.9 * len(a), name
        diff = (merged["value_prom"] - merged["value_files"]).abs()
        if name == "used":
            # Backfilled series carry no staleness markers: Prometheus keeps a finished job's last DCGM sample
            # for its 5-minute lookback, one extra sample at the end of some hours. Everything else is exact.
            assert (diff < 0.01).mean() > 0.85
            assert merged["value_prom"].sum() == pytest.approx(merged["value_files"].sum(), rel=0.05)
        else:
            assert diff.max() < 0.01, name
    # The command on the same server: a report whose allocation numbers are the files' numbers.
    out = tmp_path / "report"
    end = (files.as_of + pd.Timedelta(minutes=55)).isoformat()
    args = ["report", "--prometheus-url", server.url, "--end", end, "--days", str(days), "--model", "naive"]
    assert main([*args, "--out", str(out)]) == 0
    rows = {r["queue"]: r for r in json.loads((out / "report.json").read_text(encoding="utf-8"))["queues"]}
    window = files.allocated[files.allocated["timestamp"] > files.as_of - pd.Timedelta(days=7)]
    for queue, mean in window.groupby("series_id")["value"].mean().items():
        assert rows[str(queue)]["allocated_mean"] == pytest.approx(mean, abs=2e-3)


def test_not_a_simulator_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no volcano_queue_allocated_scalar_resources\.parquet"):
        inputs_from_directory(tmp_path)
    with pytest.raises(InputError, match="no such directory"):
        inputs_from_directory(tmp_path / "missing")
