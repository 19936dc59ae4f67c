"""The what-if's jobs rebuilt from kube-state-metrics pods, read back from a real Prometheus.

A small simulated cluster is written as OpenMetrics and served by ``prometheus`` after a promtool backfill;
the jobs rebuilt from its pod series must be the simulator's jobs (queue, GPUs, run time to the scrape step),
and ``predictor report --prometheus-url`` must replay them. A history without pod series says why.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from predictor import sim
from predictor.cli import main
from predictor.config import PrometheusSettings
from predictor.reports.podjobs import jobs_from_pods
from predictor.sources.files import FileSource, write_frame
from predictor.sources.prometheus import PrometheusSource
from tests.support.localprom import LocalPrometheus

pytestmark = pytest.mark.slow

METRICS = (
    "volcano_queue_*,DCGM_FI_DEV_GPU_UTIL,kube_node_status_allocatable,kube_pod_labels,kube_pod_status_phase,"
    "kube_pod_container_resource_requests"
)
STEP_S = 300
START, WEEKS = pd.Timestamp("2026-01-05T00:00Z"), 1.2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sim")
    settings = sim.SimSettings(start=START, weeks=WEEKS, step_s=STEP_S, seed=5, metrics=METRICS)
    jobs = sim.synthetic_jobs(START - pd.Timedelta(days=3), START + pd.Timedelta(weeks=2), seed=5, jobs_per_hour=1)
    sim.simulate(jobs, sim.ClusterSpec.uniform(2), settings).write(out, openmetrics=True)
    return out


def test_jobs_rebuilt_from_pods_are_the_simulated_jobs(
    cluster: Path, prometheus_from_openmetrics: Callable[[Path], LocalPrometheus], tmp_path: Path
) -> None:
    server = prometheus_from_openmetrics(cluster / "metrics.om")
    attempts = pd.read_parquet(cluster / "jobs_out.parquet")
    end = (START + pd.Timedelta(weeks=WEEKS)).floor("h")  # the last samples of the simulated history
    start = end - pd.Timedelta(days=8)
    found = jobs_from_pods(PrometheusSource(PrometheusSettings(url=server.url)), start, end, step_s=STEP_S)
    assert found.jobs is not None, found.why
    rebuilt = found.jobs.set_index("job_id")
    # Jobs with one attempt, wholly inside the history the pods were read from, running for a few scrape steps
    # (a pod that lives between two samples is never seen).
    once = attempts.groupby("job_id").filter(lambda a: len(a) == 1)
    once = once[(once["start"] > start + pd.Timedelta(hours=1)) & (once["end"] < end - pd.Timedelta(hours=1))]
    once = once[once["end"] - once["start"] >= pd.Timedelta(seconds=3 * STEP_S)]
    assert len(once) >= 20
    rows: dict[str, dict[Any, Any]] = {str(k): dict(v) for k, v in rebuilt.to_dict("index").items()}
    for row in once.to_dict("records"):
        key = f"{row['queue']}/job-{row['job_id']}"
        assert key in rows, key
        job = rows[key]
        assert job["queue"] == row["queue"] and int(job["num_gpus"]) == int(row["num_gpus"])
        ran = (pd.Timestamp(row["end"]) - pd.Timestamp(row["start"])).total_seconds()
        assert abs(float(job["duration_s"]) - ran) <= 2 * STEP_S, key
        assert abs((pd.Timestamp(job["submit"]) - pd.Timestamp(row["submit"])).total_seconds()) <= 2 * STEP_S, key

    # The report from the same server replays them: the what-if is there, with no "why not" line.
    out = tmp_path / "report"
    args = ["report", "--prometheus-url", server.url, "--end", end.isoformat(), "--days", "9", "--model", "naive"]
    assert main([*args, "--no-rightsize", "--out", str(out)]) == 0
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert doc["whatif"] and "whatif_note" not in doc
    assert "What-if: today's quotas against the recommendations" in (out / "report.md").read_text(encoding="utf-8")


def test_a_history_without_pod_series_says_why(tmp_path: Path) -> None:
    times = pd.date_range("2026-01-05", periods=48, freq="h", tz="UTC")
    frame = pd.DataFrame({"series_id": "team-a", "timestamp": times, "value": 1.0})
    source = FileSource(write_frame(frame, tmp_path / "history.csv"))
    found = jobs_from_pods(source, times[0], times[-1])
    assert found.jobs is None
    assert found.why == "no pod lifecycle series (kube_pod_status_phase) in the window"
