"""A real MLflow tracking store per test: sqlite in ``tmp_path`` (no mocks of MLflow: a real store answers)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from predictor.config import MlflowSettings, Settings


@pytest.fixture
def mlflow_tracking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings whose registry is a fresh sqlite store; artifacts land under ``tmp_path`` too."""
    # MLflow puts the default artifact root (./mlruns) under the working directory
    monkeypatch.chdir(tmp_path)
    return Settings(mlflow=MlflowSettings(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}"))


@pytest.fixture(scope="session")
def daily_history() -> pd.DataFrame:
    """Three weeks of two queues with a strong daily cycle: persistence is clearly the worse model."""
    rng = np.random.default_rng(7)
    t = pd.date_range("2026-03-02", periods=24 * 21, freq="1h", tz="UTC")
    cycle = np.sin(2 * np.pi * np.arange(t.size) / 24)
    parts = [
        pd.DataFrame({"series_id": sid, "timestamp": t, "value": level * (1 + 0.5 * cycle) + rng.normal(0, 1, t.size)})
        for sid, level in (("queue/a", 40.0), ("queue/b", 12.0))
    ]
    return pd.concat(parts, ignore_index=True)
