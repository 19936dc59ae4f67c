"""The loop's metrics follow the loop's injected clock, and both forecast-band families show one step."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from prometheus_client import CollectorRegistry

from predictor.config import load_settings
from predictor.loop import FileCluster, Loop, LoopMetrics
from tests.actuators.fake_apiserver import queue_object
from tests.support.actuators import resizing

NOW = pd.Timestamp("2026-11-02T10:20:00Z")


class History:
    def history(self, now: pd.Timestamp) -> pd.DataFrame:
        times = pd.date_range(end=now.floor("h"), periods=24, freq="h")
        return pd.DataFrame({"series_id": "team-a", "timestamp": times, "value": 20.0})


class Stepped:
    """A forecast that began two hours ago (a cached one) with a different band at every step."""

    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        times = pd.date_range(NOW.floor("h") - pd.Timedelta(hours=1), periods=horizon, freq="h")
        level = 20.0 + pd.RangeIndex(horizon).to_numpy()
        frame = pd.DataFrame(
            {
                "series_id": "team-a",
                "timestamp": times,
                "mean": level,
                "lo-80": level - 2,
                "hi-80": level + 2,
                "lo-95": level - 4,
                "hi-95": level + 4,
            }
        )
        return frame, {"gpu-forecast": "1"}


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_band_families_and_success_time_follow_the_loop_clock(tmp_path: Path) -> None:
    settings = load_settings(
        None, actuators={**resizing("plan"), "audit_log": tmp_path / "audit.jsonl", "plan_dir": tmp_path / "plans"}
    )
    metrics = LoopMetrics(CollectorRegistry())
    cluster = FileCluster([queue_object("team-a", deserved=16, capability=32, guarantee=4, allocated=10)])
    loop = Loop(settings, cluster=cluster, history=History(), forecaster=Stepped(), metrics=metrics, clock=lambda: NOW)
    assert loop.run_once().hold is None
    r = metrics.registry
    # the step covering 10:20 is 10:00, the forecast's second step (hi-80 = 21 + 2), in both families
    assert _value(r, "predictor_loop_forecast_gpus", queue="team-a", band="hi-80") == 23.0
    assert _value(r, "predictor_forecast_upper", series="team-a", level="80") == 23.0
    assert _value(r, "predictor_forecast_lower", series="team-a", level="80") == 19.0
    assert _value(r, "predictor_loop_last_success_timestamp_seconds") == NOW.timestamp()


def test_readiness_measures_elapsed_time_since_the_last_success() -> None:
    elapsed = [100.0]
    metrics = LoopMetrics(CollectorRegistry(), ready_within_s=60, elapsed=lambda: elapsed[0])
    assert metrics.ready() == (False, "no successful cycle yet")
    metrics.succeeded(NOW.timestamp())
    elapsed[0] += 59
    assert metrics.ready() == (True, "ok")
    elapsed[0] += 2
    assert metrics.ready() == (False, "last successful cycle 61 s ago")


def test_a_loop_without_metrics_derives_readiness_from_its_interval(tmp_path: Path) -> None:
    settings = load_settings(None, actuators={"audit_log": tmp_path / "a.jsonl"}, loop={"interval_s": 300})
    loop = Loop(settings, cluster=FileCluster([]), history=History(), forecaster=Stepped())
    assert loop.metrics.ready_within_s == settings.loop.ready_within_s == 900
