"""The central store the fleet tests share (session-scoped: starting it and pushing the history is the cost).

Two clusters simulated from different seeds with the simulator's default queue names (so both have the
same queues) remote-write into a central Prometheus (``tests/support/centralprom.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from predictor import sim
from tests.support.centralprom import CentralStore, openmetrics_series
from tests.support.localprom import prometheus_available

SEEDS = {"a": 3, "b": 4}
STEP = pd.Timedelta(minutes=5)
DAYS = 2


def simulate_cluster(start: pd.Timestamp, seed: int, out: Path) -> sim.SimResult:
    """Two days of a 4-node cluster at a 5-minute step: the queue names are the simulator's defaults."""
    jobs = sim.synthetic_jobs(start - pd.Timedelta(days=1), start + pd.Timedelta(days=DAYS), seed=seed,
                              jobs_per_hour=8, workloads_per_queue=6)
    settings = sim.SimSettings(start=start, weeks=DAYS / 7, step_s=int(STEP.total_seconds()), seed=seed,
                               warmup_days=1, metrics="core")
    result = sim.simulate(jobs, sim.ClusterSpec.uniform(4), settings)
    result.write(out, openmetrics=True, parquet=False)
    return result


@pytest.fixture(scope="session")
def central_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CentralStore, pd.Timestamp]]:
    """The running store and the first timestamp of the history (the history lies in the near future:
    remote write forwards nothing older than the sender's start)."""
    if not prometheus_available():
        pytest.skip("prometheus not installed (Debian package 'prometheus')")
    start = pd.Timestamp.now(tz="UTC").ceil("h") + pd.Timedelta(hours=1)
    history = {}
    for name, seed in SEEDS.items():
        out = tmp_path_factory.mktemp(f"cluster-{name}")
        simulate_cluster(start, seed, out)
        history[name] = openmetrics_series(out / "metrics.om")
    with CentralStore(history) as store:
        yield store, start
