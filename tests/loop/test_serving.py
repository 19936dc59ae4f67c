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


def test_the_served_models_age_and_promotion_rule_are_on_metrics(
    models: dict[str, BaseForecaster], no_fit: None
) -> None:
    class Aged(Registry):
        def get(self, family: str) -> ModelVersionInfo | None:
            tags = {"promotion_decision": "newer_data" if self.champion == "2" else "first"}
            registered = NOW.timestamp() - 86400 * int(self.champion)  # v1: a day old, v2: two (clocks differ)
            return ModelVersionInfo(family, self.champion, "run", created_unix=registered, tags=tags)

    registry, metrics = Aged(models), LoopMetrics(wall=lambda: NOW.timestamp() + 3600)
    forecaster = RegistryForecaster(registry, metrics=metrics)
    forecaster.forecast(history(), horizon=6)
    text = _metrics_text(metrics)
    assert 'predictor_loop_model_age_seconds{family="gpu-forecast"} 90000.0' in text  # 25 h since registration
    assert 'predictor_loop_model_promotion_info{decision="first",family="gpu-forecast",version="1"} 1.0' in text
    registry.champion = "2"
    forecaster.forecast(history(), horizon=6)
    text = _metrics_text(metrics)
    assert 'predictor_loop_model_promotion_info{decision="newer_data",family="gpu-forecast",version="2"} 1.0' in text
    assert 'version="1"' not in text.split("predictor_loop_model_promotion_info")[-1]  # one row per family


def test_the_demand_champion_is_loaded_once_per_version_and_kept_when_a_load_fails() -> None:
    """``RegistryDemand`` holds its champion like the forecaster: no download each cycle, last good kept."""
    from predictor.loop.demand import FrameJobs, RegistryDemand

    class Demand:
        quantile, queue_horizon_h_ = 0.9, 24

        def predict_queues(self, frame: pd.DataFrame) -> pd.DataFrame:
            last = frame.dropna(subset=["demand"]).sort_values("timestamp").groupby("series_id").tail(1)
            return pd.DataFrame(
                {"series_id": last["series_id"], "timestamp": last["timestamp"], "peak": 30.0, "now": last["demand"]}
            )

    registry = Registry({"1": Demand(), "2": Demand()})  # type: ignore[dict-item]
    registry.load = lambda family: _tabular(registry)  # type: ignore[method-assign]
    metrics = LoopMetrics()
    pending = pd.DataFrame({"series_id": ["team-a"], "timestamp": [NOW], "value": [2.0]})
    demand = RegistryDemand(registry, FrameJobs(pending), metrics=metrics)
    for _ in range(3):
        got = demand.demand(history(), NOW)
    assert got.versions == {"gpu-demand": "1"} and got.frame["queue"].tolist() == ["team-a"]
    assert registry.loads == 1  # not downloaded every cycle
    registry.champion, registry.broken = "2", {"2"}
    got = demand.demand(history(), NOW)
    assert got.versions == {"gpu-demand": "1"} and not got.frame.empty  # the last good model keeps serving
    text = _metrics_text(metrics)
    assert 'predictor_loop_model_load_failures_total{family="gpu-demand"} 1.0' in text
    assert 'predictor_loop_served_model_stale{family="gpu-demand"} 1.0' in text
    registry.broken = set()
    assert demand.demand(history(), NOW).versions == {"gpu-demand": "2"} and registry.loads == 3


def _tabular(registry: Registry) -> ServedModel:
    """``Registry.load`` for tabular (demand) models."""
    registry.loads += 1
    if registry.champion in registry.broken:
        if registry.last is not None:
            return registry.last
        raise ModelRefusedError(f"v{registry.champion} fails its digest")
    registry.last = ServedModel(registry.models[registry.champion], kind="tabular", version=registry.champion)
    return registry.last
