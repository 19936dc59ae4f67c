from __future__ import annotations

import pandas as pd

from predictor import sim
from predictor.cli import main
from predictor.sources import read_metrics

START = pd.Timestamp("2026-03-02", tz="UTC")


def test_simulate_command_writes_every_output(tmp_path, capsys):
    out = tmp_path / "out"
    schedule = tmp_path / "quota.csv"
    schedule.write_text("timestamp,queue,deserved,capability\n2026-03-02T06:00:00Z,6214e9,2,3\n")
    code = main(
        [
            "simulate",
            "--synthetic",
            "--start",
            "2026-03-02",
            "--weeks",
            "0.1",
            "--nodes",
            "4",
            "--gpu-types",
            "H100:2,A100:2",
            "--quota-schedule",
            str(schedule),
            "--step",
            "10m",
            "--seed",
            "5",
            "--faults",
            "20",
            "--jobs-per-hour",
            "10",
            "--metrics",
            "core",
            "--out",
            str(out),
            "--openmetrics",
        ]
    )
    assert code == 0, capsys.readouterr().err
    util = read_metrics(out / "metrics", ["DCGM_FI_DEV_GPU_UTIL"])
    assert set(util["modelName"]) == {"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"}
    cap = read_metrics(out / "metrics", ["volcano_queue_capacity_scalar_resources"])
    cap = cap[cap["queue_name"] == "6214e9"].set_index("timestamp")["value"]
    assert cap[cap.index >= pd.Timestamp("2026-03-02T06:00Z")].eq(3000).all() and cap.iloc[0] == 32000
    for name in (
        "jobs_out.parquet",
        "faults.csv",
        "summary.parquet",
        "queues.parquet",
        "profiles.parquet",
        "metrics.om",
    ):
        assert (out / name).is_file(), name
    queues = pd.read_parquet(out / "queues.parquet")
    late = queues[(queues["queue"] == "6214e9") & (queues["timestamp"] >= pd.Timestamp("2026-03-02T06:00Z"))]
    assert (late["capability_gpus"] == 3).all() and (late["deserved_gpus"] == 2).all()
    assert (out / "metrics" / "DCGM_FI_DEV_GPU_UTIL.parquet").is_file()
    assert not (out / "metrics" / "DCGM_FI_PROF_GR_ENGINE_ACTIVE.parquet").exists()  # not in "core"
    assert "mean_allocated_gpus" in capsys.readouterr().out


def test_philly_sample_replays_with_default_start(tmp_path, capsys):
    code = main(
        [
            "simulate",
            "--philly-sample",
            "--weeks",
            "0.2",
            "--nodes",
            "8",
            "--step",
            "30m",
            "--metrics",
            "volcano_*",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0, capsys.readouterr().err
    summary = pd.read_parquet(tmp_path / "summary.parquet")
    assert summary["allocated_gpus"].max() > 32


def test_bad_flags_are_one_line_errors(tmp_path, capsys):
    assert main(["simulate", "--synthetic", "--jobs", str(tmp_path / "x.csv"), "--out", str(tmp_path)]) == 1
    assert capsys.readouterr().err.strip() == "error: give exactly one of --jobs FILE, --synthetic or --philly-sample"
    assert main(["simulate", "--synthetic", "--step", "soon", "--out", str(tmp_path)]) == 1
    assert "--step" in capsys.readouterr().err
    assert (
        main(
            [
                "simulate",
                "--synthetic",
                "--metrics",
                "nope_*",
                "--weeks",
                "0.05",
                "--nodes",
                "2",
                "--out",
                str(tmp_path),
            ]
        )
        == 1
    )
    assert "selects no metric family" in capsys.readouterr().err


def test_quota_policy_closes_the_loop():
    jobs = sim.synthetic_jobs(START - pd.Timedelta(days=1), START + pd.Timedelta(days=1), seed=2, jobs_per_hour=30)
    settings = sim.SimSettings(start=START, weeks=1 / 7, step_s=600, seed=2, warmup_days=1, metrics="volcano_*")
    cluster = sim.ClusterSpec.uniform(16)
    calls = []

    def starve_big_queue(now, scheduler):
        calls.append((now, dict(scheduler.allocated)))
        return {"6214e9": (0.0, 0.0)} if now >= START + pd.Timedelta(hours=12) else None

    static = sim.simulate(jobs, cluster, settings)
    looped = sim.simulate(jobs, cluster, settings, quota_policy=starve_big_queue)
    assert len(calls) == 24 and calls[0][0] == START
    attempts = looped.jobs_out
    cut = START + pd.Timedelta(hours=12)
    assert not ((attempts["queue"] == "6214e9") & (attempts["start"] > cut)).any()  # nothing new admitted
    assert ((static.jobs_out["queue"] == "6214e9") & (static.jobs_out["start"] > cut)).any()
    alloc = looped.schedule.allocated[:, looped.schedule.queue_names.index("6214e9")]
    late = looped.schedule.timeline_s >= cut.timestamp()
    assert alloc[late].max() <= alloc[~late][-1]  # running gangs keep their GPUs (no reclaim), none added
    a, b = (
        sim.summary_totals(static.summary, static.schedule.attempts),
        sim.summary_totals(looped.summary, looped.schedule.attempts),
    )
    assert b["mean_pending_gpus"] > a["mean_pending_gpus"]


def test_fragmentation_follows_fgd():
    free = pd.DataFrame({"n0": [8, 3], "n1": [0, 1]}).to_numpy().T  # 2 nodes × 2 steps
    sizes, probs = [1, 4, 16], [0.5, 0.25, 0.25]
    frag = sim.fragmentation(free, sizes, probs, 8)
    # step 0: node0 fully free (usable by all), node1 has none → 0
    # step 1: node0 has 3 free: stranded for 4-GPU (0.25·3) and 16-GPU (0.25·3); node1's 1: same → 1.5 + 0.5
    assert frag.tolist() == [0.0, 2.0]


def test_public_api_is_pinned():
    assert sorted(sim.__all__) == [
        "CAUSES",
        "ClusterSpec",
        "Family",
        "GPU_TYPES",
        "GpuType",
        "METRIC_SETS",
        "QueueSpec",
        "Quota",
        "QuotaChange",
        "QuotaPolicy",
        "Scheduler",
        "SchedulerResult",
        "SimResult",
        "SimSettings",
        "StepGrid",
        "VolcanoSettings",
        "default_queues",
        "fragmentation",
        "load_jobs",
        "normalise_jobs",
        "parse_gpu_types",
        "philly_sample",
        "queue_summary",
        "queues_from_frame",
        "quota_schedule_from_frame",
        "simulate",
        "summary_totals",
        "synthetic_jobs",
        "write_openmetrics",
        "write_parquet",
    ]
    assert all(hasattr(sim, name) for name in sim.__all__)


def test_simulate_workloads_per_queue_makes_jobs_recur(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(
        [
            "simulate",
            "--synthetic",
            "--start",
            "2026-03-02",
            "--weeks",
            "0.1",
            "--nodes",
            "2",
            "--step",
            "10m",
            "--jobs-per-hour",
            "10",
            "--metrics",
            "kube_pod_labels",
            "--workloads-per-queue",
            "3",
            "--out",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr().err
    labels = read_metrics(out / "metrics", ["kube_pod_labels"])
    jobs = labels["label_volcano_sh_job_name"].drop_duplicates()
    stems = jobs.str.rsplit("-", n=1).str[0]
    assert len(stems.unique()) <= 3 * labels["label_volcano_sh_queue_name"].nunique() < len(jobs)
