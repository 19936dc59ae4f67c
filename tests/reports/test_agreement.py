"""The report's numbers agree with ``predictor forecast``, ``predictor plan`` and ``predictor rightsize``
run separately on the same data (a small simulated cluster, the commands called through the CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from predictor import sim
from predictor.cli import main

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sim")
    start = pd.Timestamp("2026-01-05T00:00Z")
    settings = sim.SimSettings(start=start, weeks=2, step_s=300, seed=3, metrics="core")
    jobs = sim.synthetic_jobs(
        start - pd.Timedelta(days=3), start + pd.Timedelta(weeks=2), seed=3, jobs_per_hour=2, workloads_per_queue=6
    )  # recurring: right-sizing needs each workload's history
    sim.simulate(jobs, sim.ClusterSpec.uniform(4), settings).write(out)
    return out


@pytest.fixture(scope="module")
def report(cluster: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    assert main(["report", "--history", str(cluster), "--model", "naive", "--out", str(out)]) == 0
    return out


def _doc(report: Path) -> dict[str, object]:
    doc: dict[str, object] = json.loads((report / "report.json").read_text(encoding="utf-8"))
    return doc


def test_forecast_numbers_match_predictor_forecast(report: Path, tmp_path: Path) -> None:
    frame = tmp_path / "forecast.csv"
    args = ["forecast", "--history", str(report / "inputs" / "demand.csv"), "--model", "naive", "--horizon", "168"]
    assert main([*args, "--out", str(frame)]) == 0
    forecast = pd.read_csv(frame)
    forecast["timestamp"] = pd.to_datetime(forecast["timestamp"], utc=True)
    doc = _doc(report)
    as_of = pd.Timestamp(doc["summary"]["as_of"])  # type: ignore[index]
    window = forecast[(forecast["timestamp"] > as_of) & (forecast["timestamp"] <= as_of + pd.Timedelta(days=7))]
    rows = doc["queues"]
    assert rows
    for row in rows:  # type: ignore[attr-defined]
        mine = window[window["series_id"].astype(str) == row["queue"]]
        assert len(mine) == 168
        assert row["forecast_p50"] == pytest.approx(mine["mean"].mean(), abs=1e-3)
        assert row["forecast_p90"] == pytest.approx(mine["hi-80"].max(), abs=1e-3)


def test_recommendations_match_predictor_plan(report: Path, tmp_path: Path) -> None:
    doc = _doc(report)
    inputs = report / "inputs"
    out = tmp_path / "plan"
    args = [
        "plan",
        "--queues",
        str(inputs / "queues.json"),
        "--nodes",
        str(inputs / "nodes.json"),
        "--forecast",
        str(inputs / "plan_forecast.csv"),  # the hours the loop's planning step forecast
        "--now",
        str(doc["summary"]["as_of"]),  # type: ignore[index]
        "--out",
        str(out),
    ]
    assert main(args) == 0
    for row in doc["queues"]:  # type: ignore[attr-defined]
        desired = yaml.safe_load((out / "queues" / f"{row['queue']}.yaml").read_text(encoding="utf-8"))
        spec = desired["spec"]
        assert float(spec["deserved"][row["resource"]]) == row["recommended_deserved"]
        assert float(spec["capability"][row["resource"]]) == row["recommended_capability"]


def test_workloads_match_predictor_rightsize(cluster: Path, report: Path, tmp_path: Path) -> None:
    table = tmp_path / "rightsize.csv"
    assert main(["rightsize", "--history", str(cluster / "metrics"), "--out", str(table)]) == 0
    frame = pd.read_csv(table)
    frame["key"] = frame["namespace"].astype(str) + "/" + frame["workload"].astype(str)
    by_key = frame.set_index("key")
    workloads = _doc(report)["workloads"]
    assert workloads, "the simulated cluster should have over-requesting workloads"
    for w in workloads:  # type: ignore[attr-defined]
        theirs = by_key.loc[w["workload"]]
        assert w["requested_gpus"] == pytest.approx(float(theirs["gpu_request"]), abs=1e-3)
        assert w["recommended_gpus"] == pytest.approx(float(theirs["recommended_gpus"]), abs=1e-3)
        assert np.isfinite(w["savings_gpu_h"]) and w["savings_gpu_h"] > 0
