from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from predictor import sim
from predictor.sim.openmetrics import format_fixed
from predictor.sources import read_metrics

STEP = pd.Timedelta(minutes=5)


def test_format_fixed_matches_python_formatting():
    values = np.array([0, 0.04, 1, 9.99, 10, 123.456, 1e12 + 0.5])
    rows = format_fixed(values, 2)
    assert [bytes(r[r != 0]).decode() for r in rows] == [f"{v:.2f}" for v in values]


@pytest.mark.slow
def test_openmetrics_is_what_promtool_wants(small_out):
    text = (small_out / "metrics.om").read_text()
    assert text.endswith("# EOF\n")
    families = re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.M)
    names = [f for f, _ in families]
    assert len(names) == len(set(names)), "each family has exactly one TYPE line"
    kinds = dict(families)
    assert kinds["node_network_receive_bytes"] == "counter"
    assert kinds["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"] == "counter"
    assert kinds["DCGM_FI_DEV_GPU_UTIL"] == "gauge"
    last: dict[str, int] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("# TYPE"):
            current = line.split()[2]
            continue
        if line.startswith("#"):
            continue
        series, value, ts = line.rsplit(" ", 2)
        name = series.split("{", 1)[0]
        assert name == current or name == f"{current}_total", "families are contiguous"
        stamp = int(ts)
        assert 1.7e9 < stamp < 1.9e9, "timestamps are in seconds"
        assert stamp > last.get(series, 0), "each series is in time order"
        last[series] = stamp
        assert float(value) >= 0


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
@pytest.mark.slow
def test_promtool_accepts_the_file(small_out, tmp_path):
    done = subprocess.run(
        [
            "promtool",
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--max-block-duration=500h",
            str(small_out / "metrics.om"),
            str(tmp_path / "db"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    with (small_out / "metrics.om").open() as text:
        om_samples = sum(1 for line in text if not line.startswith("#"))
    assert f" {om_samples} " in done.stdout  # every sample landed in the block


def test_parquet_frames_and_tables(small_run, small_out):
    names = ["DCGM_FI_DEV_GPU_UTIL", "volcano_queue_allocated_scalar_resources"]
    frame = read_metrics(small_out / "metrics", names)
    assert {"series_id", "timestamp", "value", "__name__", "Hostname", "pod", "queue_name"} <= set(frame.columns)
    assert str(frame["timestamp"].dtype) == "datetime64[ns, UTC]"
    util = frame[frame["__name__"] == "DCGM_FI_DEV_GPU_UTIL"]["value"]
    assert util.between(0, 100).all()
    alloc = frame[frame["__name__"] == "volcano_queue_allocated_scalar_resources"]
    per_step = alloc.groupby("timestamp")["value"].sum() / 1000
    assert per_step.max() <= small_run.cluster.n_gpus
    jobs_out = pd.read_parquet(small_out / "jobs_out.parquet")
    assert {"job_id", "queue", "start", "end", "wait_s", "nodes"} <= set(jobs_out.columns)
    assert (jobs_out["wait_s"] >= 0).all()
    faults = pd.read_parquet(small_out / "faults.parquet")
    assert set(faults["cause"]) <= set(sim.CAUSES)
    summary = pd.read_parquet(small_out / "summary.parquet")
    assert (summary["allocated_gpus"] <= summary["capacity_gpus"]).all()
    assert summary["fragmentation_rate"].between(0, 1).all()


def test_every_fault_is_visible_in_its_series(small_run, small_out, signatures):
    frames = {p.stem: None for p in (small_out / "metrics").glob("*.parquet")}

    def get(metric, labels, start, end):
        if frames.get(metric) is None:
            frames[metric] = read_metrics(small_out / "metrics", [metric])
        frame = frames[metric]
        mask = (frame["timestamp"] >= start) & (frame["timestamp"] <= end)
        for key, value in labels.items():
            mask &= frame[key] == value
        return frame[mask]

    faults = small_run.faults
    assert len(set(faults["cause"])) >= 8, "the small run should exercise most causes"
    for _, fault in faults.iterrows():
        if signatures.overlaps_node_outage(fault, faults):
            continue
        ok, measured = signatures.check_fault(fault, get, STEP)
        assert ok, f"{fault['cause']} fault {fault['fault_id']} not visible: {measured}"


def test_runs_are_deterministic_for_a_seed(small_run, tmp_path):
    jobs = small_run.occupancy.jobs
    again = sim.simulate(jobs, small_run.cluster, small_run.settings)
    pd.testing.assert_frame_equal(again.faults, small_run.faults)
    pd.testing.assert_frame_equal(again.jobs_out, small_run.jobs_out)
    a = sim.write_openmetrics(tmp_path / "a.om", again.families("DCGM_FI_DEV_GPU_UTIL,node_*"), again.grid)
    b = sim.write_openmetrics(tmp_path / "b.om", small_run.families("DCGM_FI_DEV_GPU_UTIL,node_*"), small_run.grid)
    assert a == b and (tmp_path / "a.om").read_bytes() == (tmp_path / "b.om").read_bytes()
