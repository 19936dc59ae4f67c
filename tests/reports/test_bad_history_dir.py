"""A simulator output directory (``report --history DIR``, ``rightsize --history DIR``) with a damaged file.

A file that is not Parquet, a metric whose values are text, or a ``summary.parquet`` without the columns the
report reads is one ``InputError`` naming the file, never a pyarrow or pandas traceback.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from predictor import sim
from predictor.errors import InputError
from predictor.reports.inputs import inputs_from_directory
from predictor.sources import read_metrics

METRICS = "volcano_queue_*,DCGM_FI_DEV_GPU_UTIL,kube_node_status_allocatable"


@pytest.fixture
def history(tmp_path: Path) -> Path:
    start = pd.Timestamp("2026-01-05T00:00Z")
    settings = sim.SimSettings(start=start, weeks=0.1, step_s=900, seed=5, metrics=METRICS)
    jobs = sim.synthetic_jobs(start - pd.Timedelta(days=1), start + pd.Timedelta(days=1), seed=5, jobs_per_hour=1)
    sim.simulate(jobs, sim.ClusterSpec.uniform(1), settings).write(tmp_path)
    return tmp_path


def test_a_metric_file_that_is_not_parquet(history: Path) -> None:
    bad = history / "metrics" / "DCGM_FI_DEV_GPU_UTIL.parquet"
    bad.write_text("garbage")
    with pytest.raises(InputError, match=r"DCGM_FI_DEV_GPU_UTIL\.parquet: cannot read as parquet"):
        read_metrics(history / "metrics", ["DCGM_FI_DEV_GPU_UTIL"])


def test_a_metric_whose_values_are_text(history: Path) -> None:
    path = history / "metrics" / "DCGM_FI_DEV_GPU_UTIL.parquet"
    pd.read_parquet(path).assign(value="lots").to_parquet(path)
    with pytest.raises(InputError, match=r"DCGM_FI_DEV_GPU_UTIL\.parquet: column 'value' is not numeric"):
        read_metrics(history / "metrics")


@pytest.mark.parametrize("damage", ["not parquet", "no fragmentation column"])
def test_a_damaged_summary(history: Path, damage: str) -> None:
    summary = history / "summary.parquet"
    if damage == "not parquet":
        summary.write_text("garbage")
    else:
        pd.DataFrame({"x": [1]}).to_parquet(summary)
    with pytest.raises(InputError, match=r"summary\.parquet: cannot read"):
        inputs_from_directory(history)
