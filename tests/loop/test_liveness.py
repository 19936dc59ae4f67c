"""``/healthz`` fails when cycles stop completing (a hung cycle), so the kubelet restarts the loop.

A real ``MetricsServer`` on a free 127.0.0.1 port; time is the metrics' injected monotonic clock, and a
cycle that never returns is a forecaster that blocks until the test releases it.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd

from predictor.config import load_settings
from predictor.loop import FileCluster, Loop, LoopMetrics
from predictor.loop.fleet_metrics import FleetMetrics
from predictor.loop.metrics import MetricsServer
from tests.actuators.fake_apiserver import queue_object
from tests.loop.test_metrics_clock import History, Stepped


def _healthz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Blocking(Stepped):
    """A forecaster whose call never returns until ``release`` is set: a hung cycle."""

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()

    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        self.entered.set()
        self.release.wait(30)
        return super().forecast(history, horizon=horizon)


def test_healthz_fails_while_a_cycle_hangs_and_recovers_when_it_completes(tmp_path: Path) -> None:
    settings = load_settings(
        None,
        actuators={"audit_log": tmp_path / "audit.jsonl", "plan_dir": tmp_path / "plans"},
        loop={"interval_s": 60, "healthy_within_intervals": 5},
    )
    elapsed = [0.0]
    metrics = LoopMetrics(live_within_s=settings.loop.live_within_s, elapsed=lambda: elapsed[0])
    hung = Blocking()
    loop = Loop(
        settings,
        cluster=FileCluster([queue_object("team-a", deserved=4, capability=8)]),
        history=History(),
        forecaster=hung,
        metrics=metrics,
        clock=lambda: pd.Timestamp("2026-11-02T10:20:00Z"),
    )
    with MetricsServer(metrics, port=0, address="127.0.0.1") as server:
        assert _healthz(server.port)[0] == 200  # just started: the first cycle gets its full time
        worker = threading.Thread(target=loop.run_once, daemon=True)
        worker.start()
        assert hung.entered.wait(30)
        elapsed[0] = 5 * 60 - 1
        assert _healthz(server.port)[0] == 200
        elapsed[0] = 5 * 60 + 1  # five intervals and no cycle completed
        code, why = _healthz(server.port)
        assert code == 503 and "no cycle completed" in why
        hung.release.set()
        worker.join(30)
        assert _healthz(server.port)[0] == 200  # it completed: alive again


def test_a_failing_cycle_is_alive_but_not_ready(tmp_path: Path) -> None:
    """A cycle that ends in an error completes: liveness holds (a restart would not help), readiness does not."""
    settings = load_settings(None, actuators={"audit_log": tmp_path / "audit.jsonl", "plan_dir": tmp_path / "plans"})
    elapsed = [0.0]
    metrics = LoopMetrics(
        ready_within_s=settings.loop.ready_within_s,
        live_within_s=settings.loop.live_within_s,
        elapsed=lambda: elapsed[0],
    )

    class Broken(Stepped):
        def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
            raise RuntimeError("model server down")

    loop = Loop(
        settings,
        cluster=FileCluster([queue_object("team-a", deserved=4, capability=8)]),
        history=History(),
        forecaster=Broken(),
        metrics=metrics,
        clock=lambda: pd.Timestamp("2026-11-02T10:20:00Z"),
    )
    for _ in range(8):
        elapsed[0] += settings.loop.interval_s
        try:
            loop.run_once()
        except Exception as exc:
            loop.fail(exc)
    assert metrics.live() == (True, "ok")
    assert metrics.ready()[0] is False


def test_a_fleet_is_alive_while_any_cluster_completes() -> None:
    elapsed = [0.0]
    fleet = FleetMetrics(["a", "b"], live_within_s=100, elapsed=lambda: elapsed[0])
    elapsed[0] = 150
    assert fleet.live()[0] is False
    fleet.clusters["b"].completed()
    assert fleet.live() == (True, "ok")
