"""The two simulated clusters the fleet tests share (constants and the run; the store is in conftest)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from predictor import sim

SEEDS = {"a": 3, "b": 4}
STEP = pd.Timedelta(minutes=5)
DAYS = 2


def simulate_cluster(start: pd.Timestamp, seed: int, out: Path) -> sim.SimResult:
    """Two days of a 4-node cluster at a 5-minute step: the queue names are the simulator's defaults."""
    jobs = sim.synthetic_jobs(
        start - pd.Timedelta(days=1), start + pd.Timedelta(days=DAYS), seed=seed, jobs_per_hour=8, workloads_per_queue=6
    )
    settings = sim.SimSettings(
        start=start, weeks=DAYS / 7, step_s=int(STEP.total_seconds()), seed=seed, warmup_days=1, metrics="core"
    )
    result = sim.simulate(jobs, sim.ClusterSpec.uniform(4), settings)
    result.write(out, openmetrics=True, parquet=False)
    return result
