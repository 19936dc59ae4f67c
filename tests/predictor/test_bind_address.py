"""Where ``/metrics`` listens is a setting, for the loop and the node agent.

The loop keeps 0.0.0.0 (its pod has its own network namespace; k8s/base NetworkPolicies limit who
scrapes it); the node agent, on the host network, defaults to loopback and k8s/ gives it the node's IP.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from predictor.actuators.xdp_agent import AgentSettings
from predictor.cli import main
from predictor.config import load_settings
from predictor.loop import LoopMetrics, MetricsServer
from tests.actuators.fake_apiserver import queue_object


def test_defaults_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().loop.metrics_address == "0.0.0.0"  # the documented loop default
    assert AgentSettings.model_fields["metrics_address"].default == "127.0.0.1"
    monkeypatch.setenv("PREDICTOR_LOOP__METRICS_ADDRESS", "127.0.0.1")
    settings = load_settings()
    assert settings.loop.metrics_address == "127.0.0.1"
    with MetricsServer(LoopMetrics(), 0, settings.loop.metrics_address) as server:
        assert server.httpd.server_address[0] == "127.0.0.1"
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5) as response:
            assert response.status == 200


def test_a_loop_that_cannot_bind_its_address_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    queues = tmp_path / "queues.json"
    queues.write_text(json.dumps({"items": [queue_object("team-a", deserved=8, capability=16)]}))
    monkeypatch.setenv("PREDICTOR_LOOP__METRICS_ADDRESS", "203.0.113.9")  # TEST-NET-3: not on this host
    monkeypatch.setenv("PREDICTOR_ACTUATORS__AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    rc = main(["loop", "--queues", str(queues), "--model", "seasonal_naive_24"])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and err.startswith("error: cannot serve /metrics on 203.0.113.9:9108") and "\n" not in err
