"""The central store the fleet tests share (session-scoped: starting it and pushing the history is the cost).

Two clusters simulated from different seeds with the simulator's default queue names (so both have the
same queues) remote-write into a central Prometheus (``tests/support/centralprom.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest

from tests.sources.fleetdata import SEEDS, simulate_cluster
from tests.support.centralprom import CentralStore, openmetrics_series
from tests.support.localprom import prometheus_available


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
