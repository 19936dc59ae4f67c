"""A small simulated cluster shared by the demand tests (deterministic, so session-scoped).

Jobs recur (6 workload templates per queue) so right-sizing has history to work from, as on real clusters.

Three days of four 8-GPU nodes at a 5-minute step with only the four metric families right-sizing reads:
about a second to simulate and a few seconds to backfill into a real Prometheus.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from predictor import sim
from tests.rightsize.simdata import FAMILIES, START


@pytest.fixture(scope="session")
def demand_run() -> sim.SimResult:
    jobs = sim.synthetic_jobs(
        START - pd.Timedelta(days=1), START + pd.Timedelta(days=3), seed=11, jobs_per_hour=8, workloads_per_queue=6
    )
    settings = sim.SimSettings(start=START, weeks=3 / 7, step_s=300, seed=11, warmup_days=1, metrics=FAMILIES)
    return sim.simulate(jobs, sim.ClusterSpec.uniform(4), settings)


@pytest.fixture(scope="session")
def demand_out(demand_run: sim.SimResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demand-sim")
    demand_run.write(out, openmetrics=True, parquet=True)
    return out
