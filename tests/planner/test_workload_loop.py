"""The loop plans with the workload: gang floors reach the plan with their code, FGD reaches /metrics."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from prometheus_client import CollectorRegistry

from predictor.config import load_settings
from predictor.errors import DataSourceError
from predictor.loop import FileCluster, Loop, LoopMetrics
from predictor.planner.workload import JobSummary, NodeSummary, Workload
from tests.actuators.fake_apiserver import queue_object
from tests.support.actuators import resizing

NOW = pd.Timestamp("2026-11-02T10:20:00Z")
NODES = tuple(NodeSummary(f"n{i}", 8, 4 if i == 0 else 0) for i in range(8))
JOBS = (JobSummary("team-a", "big", 6, 8), JobSummary("team-a", "small", 1, 4, "running", nodes=("n0",)))


class History:
    def history(self, now: pd.Timestamp) -> pd.DataFrame:
        times = pd.date_range(end=now.floor("h"), periods=24, freq="h")
        return pd.DataFrame({"series_id": "team-a", "timestamp": times, "value": 20.0})


class Flat:
    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        times = pd.date_range(NOW.floor("h"), periods=horizon, freq="h")
        return pd.DataFrame(
            {
                "series_id": "team-a",
                "timestamp": times,
                "mean": 20.0,
                "lo-80": 18.0,
                "hi-80": 22.0,
                "lo-95": 16.0,
                "hi-95": 24.0,
            }
        ), {"gpu-forecast": "1"}


class Reader:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def workload(self, now: pd.Timestamp) -> Workload | None:
        if self.error:
            raise self.error
        return Workload(JOBS, NODES)


def run(tmp_path: Path, reader: Reader | None) -> tuple[Loop, CollectorRegistry]:
    settings = load_settings(
        None, actuators={**resizing("plan"), "audit_log": tmp_path / "audit.jsonl", "plan_dir": tmp_path / "plans"}
    )
    metrics = LoopMetrics(CollectorRegistry())
    cluster = FileCluster([queue_object("team-a", deserved=16, capability=32, guarantee=4, allocated=10)])
    loop = Loop(
        settings,
        cluster=cluster,
        history=History(),
        forecaster=Flat(),
        metrics=metrics,
        clock=lambda: NOW,
        workload=reader,
    )
    return loop, metrics.registry


def test_the_loop_raises_capability_to_the_gang_and_exports_fragmentation(tmp_path: Path) -> None:
    loop, registry = run(tmp_path, Reader())
    report = loop.run_once()
    assert report.plan is not None
    capability = next(c for c in report.plan.changes if c.field == "capability")
    assert (capability.before, capability.after, capability.code) == (32.0, 48.0, "gang_floor")
    assert registry.get_sample_value("predictor_loop_held_total", {"reason": "gang_floor"}) == 1.0
    # task mix {4: 1/7, 8: 6/7}; only n0 (4 free) strands GPUs: 6/7 × 4 for the 8-GPU pods
    assert registry.get_sample_value("predictor_loop_fragmentation", {"measure": "fgd_gpus"}) == pytest.approx(24 / 7)
    assert registry.get_sample_value("predictor_loop_fragmentation", {"measure": "rate"}) == pytest.approx(24 / 7 / 60)
    assert registry.get_sample_value("predictor_loop_fragmentation", {"measure": "free_nodes"}) == 7.0


@pytest.mark.parametrize("reader", [None, Reader(DataSourceError("kube-state-metrics down"))])
def test_unknown_jobs_set_no_floor_and_no_fragmentation(tmp_path: Path, reader: Reader | None) -> None:
    loop, registry = run(tmp_path, reader)
    report = loop.run_once()
    assert report.plan is not None and report.hold is None
    assert [c for c in report.plan.changes if c.field == "capability"] == []  # 27 is a shrink: it waits
    assert registry.get_sample_value("predictor_loop_fragmentation", {"measure": "fgd_gpus"}) is None
