"""Fixtures shared by the loop tests: the fake Volcano API server with two team queues, and a client to it.

A module that needs other queues or another server defines its own ``fake`` (and ``api``), which takes
precedence over these.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.actuators.fake_apiserver import FakeApiServer, serve_team_queues


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with serve_team_queues() as server:
        yield server


@pytest.fixture
def api(fake: FakeApiServer) -> Iterator[client.ApiClient]:
    with client.ApiClient(client.Configuration(host=fake.url)) as api_client:
        yield api_client
