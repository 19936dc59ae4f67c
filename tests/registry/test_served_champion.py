"""Registered → served, against a real sqlite MLflow store: the loop's forecaster serves the champion's
fitted state (``auto`` with its LSTM) on the newest history without training, and keeps it when the next
champion cannot be loaded."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from prometheus_client import generate_latest

from models.forecast import BaseForecaster, LSTMForecaster, auto, forecasters, parallel
from predictor.config import Settings
from predictor.loop import LoopMetrics, RegistryForecaster
from predictor.registry import FORECAST_FAMILY as FAMILY
from predictor.registry import ModelRegistry

H = 12


def test_the_registered_auto_champion_is_served_as_registered(
    mlflow_tracking: Settings, daily_history: pd.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cut = daily_history["timestamp"].max() - pd.Timedelta(days=2)
    old, newest = daily_history[daily_history["timestamp"] <= cut], daily_history
    model = auto.AutoForecaster(
        windows=2,
        step=24,
        horizon=H,
        candidate_params={"lstm": {"horizon": H, "lookback_days": 2, "hidden_size": 4, "max_epochs": 1}},
    ).fit(old)
    # the history's daily cycle is strong: the default seasonal pool, so level_profile round-trips through MLflow too
    assert set(model.members_) == {"lstm", "level_profile"}
    registry = ModelRegistry(mlflow_tracking.mlflow)
    registry.promote(FAMILY, registry.log_model(FAMILY, model).version)
    metrics = LoopMetrics()
    forecaster = RegistryForecaster(ModelRegistry(mlflow_tracking.mlflow), metrics=metrics)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("serving must not fit or backtest")

    with monkeypatch.context() as mp:
        for owner, name in ((BaseForecaster, "fit"), (LSTMForecaster, "_train"), (parallel, "run_backtest")):
            mp.setattr(owner, name, refuse)
        frame, versions = forecaster.forecast(newest, horizon=H)
        assert versions == {FAMILY: "models:/gpu-forecast/1"}
        pd.testing.assert_frame_equal(frame, model.update(newest).predict(H), rtol=1e-6)
        assert frame["timestamp"].min() == newest["timestamp"].max() + pd.Timedelta(hours=1)

    # a new champion whose files are gone (a lost artifact volume): the loaded one keeps serving
    registry.promote(FAMILY, registry.log_model(FAMILY, forecasters.create("naive").fit(old)).version)
    shutil.rmtree(tmp_path / "mlruns")
    frame, versions = forecaster.forecast(newest, horizon=H)
    assert versions == {FAMILY: "models:/gpu-forecast/1"} and not frame.empty
    text = generate_latest(metrics.registry).decode()
    assert 'predictor_loop_served_model_stale{family="gpu-forecast"} 1.0' in text
    assert 'predictor_loop_model_load_failures_total{family="gpu-forecast"} 1.0' in text
