"""Per-run usage tables match the simulator's ground truth; workload names drop generated suffixes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from models.demand_features import queue_features, run_features
from predictor import sim
from predictor.errors import DataSourceError, InputError
from predictor.rightsize import RightsizeSettings, from_frame, from_history, rightsize, workload_of_job, workload_of_pod


@pytest.mark.parametrize(
    ("pod", "workload"),
    [
        ("train-7d9f8c6b5-x2k4q", "train"),
        ("etl-x2k4q", "etl"),
        ("bert-large-worker-3", "bert-large"),
        ("db-0", "db"),
        ("serve-model", "serve-model"),
        ("job-s19-worker-0", "job-s19"),
    ],
)
def test_workload_of_pod(pod: str, workload: str) -> None:
    assert workload_of_pod(pod) == workload


def test_runs_match_ground_truth(demand_run: sim.SimResult, demand_out: Path) -> None:
    _, runs = rightsize(from_history(demand_out / "metrics"), RightsizeSettings())
    truth = demand_run.profiles.as_frame(demand_run.schedule_jobs)
    truth["job"] = "job-" + truth["job_id"]
    merged = runs.merge(truth, on="job")
    # Runs of one template are one workload: the Volcano job name without its run number.
    assert (merged["workload"] == merged["job"].str.rsplit("-", n=1).str[0]).all()
    assert runs["workload"].nunique() < len(runs) / 3
    assert len(merged) == len(runs) > 50
    assert (merged["gpu_request"] == merged["num_gpus"]).all()
    # A busy job keeps exactly its profile's GPUs busy (idle-ish jobs sit below the 5 % threshold).
    busy = merged[merged["util_mean_y"] > 20]
    assert (busy["gpus_used_max"] == busy["gpus_used"]).mean() > 0.95
    assert (merged["queue_x"] == merged["queue_y"]).all()
    assert (merged["mem_peak_mib"] <= merged["gpu_mem_total_mib"]).all()


def test_run_features_never_look_ahead(demand_out: Path) -> None:
    _, runs = rightsize(from_history(demand_out / "metrics"), RightsizeSettings())
    feats = run_features(runs)
    first = runs.groupby("queue")["start"].transform("min") == runs["start"]
    assert (feats.loc[first.to_numpy(), "q_n"] == 0).all()
    with pytest.raises(ValueError, match="unknown demand target"):
        run_features(runs, "bogus")


def test_missing_pod_label_is_named() -> None:
    t = pd.Timestamp("2026-01-01", tz="UTC")
    frame = pd.DataFrame(
        {"series_id": ["a"], "timestamp": [t], "value": [50.0], "__name__": ["DCGM_FI_DEV_GPU_UTIL"], "gpu": ["0"]}
    )
    with pytest.raises(DataSourceError, match="no 'pod' label"):
        from_frame(frame, "f.csv")
    with pytest.raises(InputError, match="__name__"):
        from_frame(frame.drop(columns="__name__"), "f.csv")


def test_queue_features_target_is_next_day_peak() -> None:
    stamps = pd.date_range("2026-01-01", periods=24 * 10, freq="h", tz="UTC")
    demand = np.arange(len(stamps), dtype=float)
    f = queue_features(pd.DataFrame({"series_id": "q", "timestamp": stamps, "demand": demand}))
    row = f.iloc[0]
    hour = int((row["timestamp"] - stamps[0]) / pd.Timedelta(hours=1))
    assert row["target"] == hour + 24
    assert row["baseline_max24"] == pytest.approx(hour)


@pytest.mark.parametrize(
    ("job", "workload"),
    [
        ("bert-ft-20260302-1a2b3c", "bert-ft"),
        ("nightly-retrain-1700000000", "nightly-retrain"),
        ("train-2026-03-02", "train"),
        ("job-6214e9-w03-123", "job-6214e9-w03"),
        ("sweep_lr_42", "sweep_lr"),
        ("llama-7b-ft", "llama-7b-ft"),
        ("job-s19", "job-s19"),
    ],
)
def test_workload_of_job_strips_run_ids(job: str, workload: str) -> None:
    assert workload_of_job(job) == workload


def test_labels_and_job_stems_group_runs_into_workloads() -> None:
    """Two runs of a recurring Volcano job are one workload with two runs; an ``app`` label wins."""
    t0 = pd.Timestamp("2026-01-01", tz="UTC")
    rows = []
    pods = {"etl-1-worker-0": ("etl-1", ""), "etl-2-worker-0": ("etl-2", ""), "x-a1b2c-worker-0": ("x-a1b2c", "api")}
    for k, (pod, (job, app)) in enumerate(pods.items()):
        for i in range(3):
            t = t0 + pd.Timedelta(minutes=5 * i)
            base = {"namespace": "ns", "pod": pod, "timestamp": t, "series_id": pod}
            rows.append({**base, "__name__": "DCGM_FI_DEV_GPU_UTIL", "value": 50.0, "UUID": f"g{k}"})
            rows.append(
                {
                    **base,
                    "__name__": "kube_pod_container_resource_requests",
                    "value": 1.0,
                    "resource": "nvidia_com_gpu",
                    "container": "main",
                }
            )
            rows.append(
                {
                    **base,
                    "__name__": "kube_pod_labels",
                    "value": 1.0,
                    "label_volcano_sh_job_name": job,
                    "label_app": app,
                }
            )
    _, runs = rightsize(from_frame(pd.DataFrame(rows), "f"), RightsizeSettings())
    assert sorted(runs["workload"]) == ["api", "etl", "etl"]
    assert sorted(runs.loc[runs["workload"] == "etl", "run"]) == [0, 1]
