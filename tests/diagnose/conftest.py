"""Small simulated runs and a real MLflow store for the root-cause tests (kept tiny: 2 shared cores)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.rca_data import Scenario, simulate_scenario
from predictor import sim
from predictor.config import MlflowSettings, Settings

# 6 nodes, 12 hours at 1-minute steps: enough faults of several causes, a few seconds to simulate.
SMALL = Scenario(seed=21, nodes=6, fault_rate_per_day=40, days=0.5)


@pytest.fixture(scope="session")
def small_sim() -> sim.SimResult:
    return simulate_scenario(SMALL)


@pytest.fixture
def mlflow_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings whose registry is a fresh sqlite store (artifacts under ``tmp_path``; no mocks)."""
    monkeypatch.chdir(tmp_path)
    return Settings(mlflow=MlflowSettings(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}"))


@pytest.fixture(scope="session")
def rca_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Labelled windows of the tiny scenarios, computed once per session."""
    return tmp_path_factory.mktemp("rca-cache")
