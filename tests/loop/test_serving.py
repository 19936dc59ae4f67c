"""The loop serves the registered champion as registered: ``update`` on the newest history, no refit.

What an operator relies on: the model in memory is the champion, loaded once per version; a champion that
fails to load leaves the last good model serving and ``/metrics`` says so (stale, failed loads); forecasts
name the model URI that produced them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from prometheus_client import generate_latest

from models.forecast import BaseForecaster, forecasters
from predictor.config import load_settings
from predictor.errors import ModelRefusedError, RegistryError
from predictor.loop import FileCluster, Loop, LoopMetrics, RegistryForecaster
from predictor.registry import ModelVersionInfo
from predictor.registry.served import ServedModel
from tests.actuators.fake_apiserver import queue_object
from tests.support.actuators import resizing

FAMILY = "gpu-forecast"
NOW = pd.Timestamp("2026-11-02T10:00:00Z")


def history(end: pd.Timestamp = NOW, hours: int = 200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    times = pd.date_range(end=end, periods=hours, freq="h")
    return pd.DataFrame(
        [
            {"series_id": q, "timestamp": t, "value": level + rng.normal(0, 2)}
            for q, level in (("team-a", 22.0), ("team-b", 41.0))
            for t in times
        ]
    )


class Registry:
    """A ``ChampionRegistry`` holding fitted models by version; ``load`` fails like ``ModelRegistry.load``:
    with the last model it loaded, if any, else with the error."""

    def __init__(self, models: dict[str, BaseForecaster]) -> None:
        self.models, self.champion, self.broken = models, "1", set[str]()
        self.loads = 0
        self.last: ServedModel | None = None

    def get(self, family: str) -> ModelVersionInfo | None:
        return ModelVersionInfo(family=family, version=self.champion, run_id="run")

    def load(self, family: str) -> ServedModel:
        self.loads += 1
        if self.champion in self.broken:
            if self.last is not None:
                return self.last
            raise ModelRefusedError(f"cannot load models:/{family}@champion: v{self.champion} fails its digest")
        self.last = ServedModel(self.models[self.champion], version=self.champion)
        return self.last


@pytest.fixture(scope="module")
def models() -> dict[str, BaseForecaster]:
    old = history(NOW - pd.Timedelta(hours=48))
    return {"1": forecasters.create("ets").fit(old), "2": forecasters.create("window_mean_24").fit(old)}


@pytest.fixture
def no_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the served path must not fit")

    monkeypatch.setattr(BaseForecaster, "fit", refuse)


def _metrics_text(metrics: LoopMetrics) -> str:
    return generate_latest(metrics.registry).decode()


def test_the_champion_is_served_with_update_and_loaded_once_per_version(
    models: dict[str, BaseForecaster], no_fit: None
) -> None:
    registry = Registry(models)
    forecaster = RegistryForecaster(registry)
    newest = history()
    frame, versions = forecaster.forecast(newest, horizon=6)
    assert versions == {FAMILY: "models:/gpu-forecast/1"}
    pd.testing.assert_frame_equal(frame, models["1"].update(newest).predict(6, level=(80, 95)))
    assert frame.groupby("series_id")["timestamp"].min().eq(NOW + pd.Timedelta(hours=1)).all()
    for _ in range(3):
        forecaster.forecast(newest, horizon=6)
    assert registry.loads == 1  # kept in memory while the champion stays
    registry.champion = "2"
    frame, versions = forecaster.forecast(newest, horizon=6)
    assert versions == {FAMILY: "models:/gpu-forecast/2"} and registry.loads == 2
    pd.testing.assert_frame_equal(frame, models["2"].update(newest).predict(6, level=(80, 95)))


def test_a_champion_that_fails_to_load_leaves_the_last_good_one_serving_and_says_so(
    models: dict[str, BaseForecaster], no_fit: None
) -> None:
    registry, metrics = Registry(models), LoopMetrics()
    forecaster = RegistryForecaster(registry, metrics=metrics)
    forecaster.forecast(history(), horizon=6)
    assert 'predictor_loop_served_model_stale{family="gpu-forecast"} 0.0' in _metrics_text(metrics)
    registry.champion, registry.broken = "2", {"2"}
    for _ in range(2):
        frame, versions = forecaster.forecast(history(), horizon=6)
    assert versions == {FAMILY: "models:/gpu-forecast/1"} and not frame.empty
    assert "did not load" in forecaster.stale
    text = _metrics_text(metrics)
    assert 'predictor_loop_served_model_info{family="gpu-forecast",uri="models:/gpu-forecast/1"} 1.0' in text
    assert 'predictor_loop_served_model_stale{family="gpu-forecast"} 1.0' in text
    assert 'predictor_loop_model_load_failures_total{family="gpu-forecast"} 2.0' in text  # retried each cycle
    registry.broken = set()  # the champion is fixed: served at the next cycle
    assert forecaster.forecast(history(), horizon=6)[1] == {FAMILY: "models:/gpu-forecast/2"}
    text = _metrics_text(metrics)
    assert 'predictor_loop_served_model_stale{family="gpu-forecast"} 0.0' in text
    assert 'uri="models:/gpu-forecast/1"' not in text


def test_without_any_good_model_the_load_error_reaches_the_loop(models: dict[str, BaseForecaster]) -> None:
    registry = Registry(models)
    registry.broken = {"1"}
    with pytest.raises(RegistryError, match="fails its digest"):
        RegistryForecaster(registry).forecast(history(), horizon=6)


def test_the_loop_publishes_what_it_serves(models: dict[str, BaseForecaster], tmp_path: Path, no_fit: None) -> None:
    class Newest:
        def history(self, now: pd.Timestamp) -> pd.DataFrame:
            return history(now.floor("h"))

    settings = load_settings(
        None, actuators={**resizing("plan"), "audit_log": tmp_path / "audit.jsonl", "plan_dir": tmp_path / "plans"}
    )
    cluster = FileCluster([queue_object(q, deserved=20, capability=40) for q in ("team-a", "team-b")])
    loop = Loop(
        settings, cluster=cluster, history=Newest(), forecaster=RegistryForecaster(Registry(models)), clock=lambda: NOW
    )
    report = loop.run_once()
    assert report.hold is None, report.hold
    text = _metrics_text(loop.metrics)
    assert 'predictor_loop_served_model_info{family="gpu-forecast",uri="models:/gpu-forecast/1"} 1.0' in text
    assert 'predictor_loop_model_info{family="gpu-forecast",version="models:/gpu-forecast/1"} 1.0' in text
