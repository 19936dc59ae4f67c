"""train → register → alias → load by alias → same forecast, against a real sqlite MLflow store."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from pipelines.forecast import ForecastJob, train_forecast
from predictor.config import Settings
from predictor.errors import RegistryError
from predictor.registry import CHALLENGER, CHAMPION, ModelRegistry, beats
from predictor.registry import FORECAST_FAMILY as FAMILY

H = 24
AUTO = {"candidates": ("naive", "seasonal_naive_24", "ets"), "windows": 2}


def test_beats_needs_the_margin() -> None:
    assert beats(0.9, 1.0, 0.05)
    assert not beats(0.96, 1.0, 0.05)
    assert not beats(1.0, 1.0, 0.0)


@pytest.mark.slow
def test_round_trip_and_promotion_rules(mlflow_tracking: Settings, daily_history: pd.DataFrame) -> None:
    registry = ModelRegistry(mlflow_tracking.mlflow)
    first = train_forecast(
        mlflow_tracking, daily_history, ForecastJob(model="naive", horizon=H, windows=2), registry=registry
    )
    assert first.promoted and first.reason == "no champion yet"

    better = train_forecast(
        mlflow_tracking,
        daily_history,
        ForecastJob(model="auto", horizon=H, windows=2, model_params=AUTO),
        registry=registry,
    )
    assert better.promoted, better.reason
    assert better.score < first.score

    worse = train_forecast(
        mlflow_tracking, daily_history, ForecastJob(model="naive", horizon=H, windows=2), registry=registry
    )
    assert not worse.promoted, worse.reason
    champion = registry.get(FAMILY, CHAMPION)
    challenger = registry.get(FAMILY, CHALLENGER)
    assert champion is not None and champion.version == better.version
    assert challenger is not None and challenger.version == worse.version
    assert champion.params["model"] == "auto"
    assert "backtest_mase" in champion.metrics and "backtest_coverage_80" in champion.metrics

    # a fresh registry object (as a serving process would have) loads the same forecasts by alias
    loaded = ModelRegistry(mlflow_tracking.mlflow).load(FAMILY, CHAMPION)
    served = loaded.predict(pd.DataFrame({"horizon": [H]}))
    pd.testing.assert_frame_equal(served, better.estimator.predict(H))
    narrow = loaded.predict(pd.DataFrame({"horizon": [6], "levels": ["50,90"]}))
    assert list(narrow.columns) == ["series_id", "timestamp", "mean", "lo-50", "hi-50", "lo-90", "hi-90"]


def test_load_keeps_the_last_good_model(mlflow_tracking: Settings, daily_history: pd.DataFrame, tmp_path: Path) -> None:
    registry = ModelRegistry(mlflow_tracking.mlflow)
    with pytest.raises(RegistryError, match="cannot load models:/gpu-forecast@champion"):
        registry.load(FAMILY)
    train_forecast(
        mlflow_tracking, daily_history, ForecastJob(model="naive", horizon=H, windows=1), registry=registry, plots=False
    )
    good = registry.load(FAMILY)
    shutil.rmtree(tmp_path / "mlruns")  # the artifact store goes away (outage, lost volume)
    assert registry.load(FAMILY) is good


def test_train_forecast_command_registers_a_champion(
    mlflow_tracking: Settings, daily_history: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from predictor.cli import main

    history = tmp_path / "history.parquet"
    daily_history.to_parquet(history)
    uri = mlflow_tracking.mlflow.tracking_uri
    args = ["train", "forecast", "--history", str(history), "--model", "naive", "--horizon", "24"]
    assert main([*args, "--windows", "1", "--tracking-uri", uri]) == 0
    assert "v1: promoted to champion" in capsys.readouterr().out
    assert ModelRegistry(mlflow_tracking.mlflow).get(FAMILY) is not None


def test_artifacts_go_to_the_configured_location(
    mlflow_tracking: Settings, daily_history: pd.DataFrame, tmp_path: Path
) -> None:
    settings = mlflow_tracking.model_copy(
        update={"mlflow": mlflow_tracking.mlflow.model_copy(update={"artifact_location": str(tmp_path / "art")})}
    )
    registry = ModelRegistry(settings.mlflow)
    train_forecast(
        settings, daily_history, ForecastJob(model="naive", horizon=H, windows=1), registry=registry, plots=False
    )
    assert any((tmp_path / "art").rglob("MLmodel"))
    assert not (tmp_path / "mlruns").exists()
    assert registry.load(FAMILY).predict(pd.DataFrame({"horizon": [H]}))["series_id"].nunique() == 2
