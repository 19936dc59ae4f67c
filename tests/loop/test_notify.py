"""The notification webhook, against a real HTTP server on 127.0.0.1: applied changes and holds reach it
with the plan link; a webhook that fails or hangs never fails the cycle."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from predictor.actuators.volcano import VolcanoActuator
from predictor.config import load_settings
from predictor.errors import DataSourceError
from predictor.loop import KubeCluster, Loop
from tests.actuators.fake_apiserver import FakeApiServer, serve_team_queues
from tests.loop.test_loop import NOW, Flat, History
from tests.support.actuators import resizing


@dataclass
class Hook:
    """A chat webhook: records every POST body; answers ``status`` after ``delay_s``."""

    url: str = ""
    bodies: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    delay_s: float = 0.0


@contextmanager
def webhook(hook: Hook | None = None) -> Iterator[Hook]:
    hook = hook or Hook()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            hook.bodies.append({"path": self.path, "type": self.headers.get("Content-Type"), **json.loads(raw)})
            time.sleep(hook.delay_s)
            try:
                self.send_response(hook.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    hook.url = f"http://127.0.0.1:{httpd.server_address[1]}/services/T0/B0/secret"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with serve_team_queues() as server:
        yield server


def make_loop(fake: FakeApiServer, tmp_path: Path, notify: dict[str, Any], history: History | None = None) -> Loop:
    actuators = {**resizing("apply"), "audit_log": tmp_path / "audit.jsonl", "plan_dir": tmp_path / "plans"}
    settings = load_settings(None, actuators={**actuators, "notify": notify})
    actuator = VolcanoActuator(client.ApiClient(client.Configuration(host=fake.url)), timeout_s=2)
    return Loop(
        settings,
        cluster=KubeCluster(actuator),
        history=history or History({"team-a": 22, "team-b": 41}),
        forecaster=Flat(),
        actuator=actuator,
        clock=lambda: NOW,
    )


PLAN_URL = "https://grafana.example/d/predictor?var-cycle={cycle}"


def test_applied_changes_reach_the_webhook_with_the_plan_link(fake: FakeApiServer, tmp_path: Path) -> None:
    with webhook() as hook:
        report = make_loop(fake, tmp_path, {"webhook_url": hook.url, "plan_url": PLAN_URL}).run_once()
    assert [o.outcome for o in report.outcomes] == ["applied", "applied"]
    assert len(hook.bodies) == 1 and hook.bodies[0]["type"] == "application/json"
    text = hook.bodies[0]["text"]
    assert text.startswith("gpu-capacity-predictor cycle 2026-11-02T10:00:00Z: 2 queue(s) resized")
    assert "team-a: deserved[nvidia.com/gpu] 16 → 24 (" in text
    assert text.endswith("plan: https://grafana.example/d/predictor?var-cycle=2026-11-02T10:00:00Z")


def test_a_hold_worth_a_look_is_sent_from_a_url_file(fake: FakeApiServer, tmp_path: Path) -> None:
    secret = tmp_path / "webhook-url"
    with webhook() as hook:
        secret.write_text(hook.url + "\n")
        down = History({}, error=DataSourceError("prometheus: connection refused"))
        make_loop(fake, tmp_path, {"webhook_url_file": secret}, history=down).run_once()
    assert len(hook.bodies) == 1
    assert (
        "every queue held (source_down): history unavailable: prometheus: connection refused" in hook.bodies[0]["text"]
    )


@pytest.mark.parametrize("hook", [Hook(status=500), Hook(delay_s=3.0)], ids=["http-500", "timeout"])
def test_a_failing_webhook_is_logged_and_the_cycle_goes_on(
    fake: FakeApiServer, tmp_path: Path, hook: Hook, caplog: pytest.LogCaptureFixture
) -> None:
    with webhook(hook) as served:
        started = time.monotonic()
        report = make_loop(fake, tmp_path, {"webhook_url": served.url, "timeout_s": 0.5}).run_once()
        took = time.monotonic() - started
    assert [o.outcome for o in report.outcomes] == ["applied", "applied"]  # the cycle did its work
    assert len(served.bodies) == 1 and took < 30
    failed = [r.getMessage() for r in caplog.records if "notification to" in r.getMessage()]
    assert failed and "secret" not in failed[0] and "http://127.0.0.1" in failed[0]


def test_no_webhook_no_request_and_the_url_stays_out_of_reprs(tmp_path: Path) -> None:
    settings = load_settings(None, actuators={"notify": {"webhook_url": "https://hooks.example/T/B/s3cr3t"}})
    assert "s3cr3t" not in repr(settings) and "s3cr3t" not in str(settings.model_dump())
