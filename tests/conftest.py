"""Fixtures shared by every test package: real local services, owned and cleaned up by the fixture.

``prometheus_from_openmetrics`` backfills an OpenMetrics file with promtool and serves it with a real
``prometheus`` on a free 127.0.0.1 port; each server is stopped when the test session ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.localprom import LocalPrometheus, backfill, prometheus_available

# Two shared cores make wall-clock deadlines flaky; properties are about correctness, not speed.
settings.register_profile("project", deadline=None)
settings.load_profile("project")


@pytest.fixture(scope="session")
def prometheus_from_openmetrics(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[Path], LocalPrometheus]]:
    """Factory: ``start(openmetrics_file) -> LocalPrometheus`` (already serving; stopped at session end)."""
    if not prometheus_available():
        pytest.skip("prometheus/promtool not installed (Debian package 'prometheus'); .ci/run installs it")
    servers: list[LocalPrometheus] = []

    def start(openmetrics_file: Path) -> LocalPrometheus:
        tsdb = tmp_path_factory.mktemp("tsdb")
        backfill(openmetrics_file, tsdb)
        server = LocalPrometheus(tsdb).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
