"""The one promotion policy (``predictor.registry.promotion``) against a real sqlite MLflow store."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from models.forecast import NaiveForecaster
from pipelines.forecast import ForecastJob, train_forecast
from predictor.config import Settings
from predictor.registry import (
    CHALLENGER,
    CHAMPION,
    FORECAST_FAMILY,
    ModelRegistry,
    Verdict,
    judge,
    settle,
)

FAMILY = "policy-test"


def _register(registry: ModelRegistry, verdict: Verdict) -> tuple[str, bool]:
    """Log a (tiny) new version as the pipelines do, then let the verdict move ``champion``."""
    info = registry.log_model(FAMILY, NaiveForecaster(), pip_requirements=("pandas",))
    return info.version, settle(registry, FAMILY, info.version, verdict)


def _champion(registry: ModelRegistry) -> str | None:
    info = registry.get(FAMILY, CHAMPION)
    return None if info is None else info.version


def test_first_better_worse_and_unscorable(mlflow_tracking: Settings, tmp_path: Path) -> None:
    registry = ModelRegistry(mlflow_tracking.mlflow)
    seen: list[Any] = []

    def rescore(champion: Any) -> float:
        seen.append(champion)
        return 1.0

    # no champion yet: the first version is promoted, whatever its score
    first = judge(registry, FAMILY, 5.0, rescore, margin=0.1)
    assert first == Verdict(promote=True, reason="no champion yet", decision="first", score=5.0)
    assert _register(registry, first) == ("1", True) and _champion(registry) == "1"
    assert not seen  # nothing to re-score

    # better by more than the margin: promoted; the champion was re-scored from the registry's estimator
    better = judge(registry, FAMILY, 0.8, rescore, margin=0.1, metric="backtest MASE", data="the same window")
    assert better.promote and better.champion_version == "1" and better.champion_score == 1.0
    assert better.reason == (
        "backtest MASE 0.8000 vs champion v1 1.0000 on the same window: "
        "better by more than the 0% tolerance and the 10% margin; promoted"
    )
    assert better.decision == "better"
    assert isinstance(seen[-1], NaiveForecaster)
    assert _register(registry, better) == ("2", True) and _champion(registry) == "2"

    # the margin is relative to the champion's score
    assert judge(registry, FAMILY, 0.89, rescore, margin=0.1).promote
    assert not judge(registry, FAMILY, 0.9, rescore, margin=0.1).promote

    # better, but inside the margin: kept; the new version stays challenger
    worse = judge(registry, FAMILY, 0.95, rescore, margin=0.1)
    assert not worse.promote and worse.rescored_score == 1.0
    assert _register(registry, worse) == ("3", False)
    assert _champion(registry) == "2" and registry.get(FAMILY, CHALLENGER).version == "3"  # type: ignore[union-attr]


def _unscorable(champion: Any) -> float:
    raise ValueError("the champion expects a column the new data lacks")


def test_a_champion_that_cannot_be_rescored_is_kept(mlflow_tracking: Settings, tmp_path: Path) -> None:
    registry = ModelRegistry(mlflow_tracking.mlflow)
    _register(registry, judge(registry, FAMILY, 1.0, _unscorable, margin=0.0))

    # the re-scoring fails on the new data
    kept = judge(registry, FAMILY, 0.01, _unscorable, margin=0.0)
    assert not kept.promote and kept.champion_version == "1"
    assert kept.champion_score is not None and math.isnan(kept.champion_score) and kept.rescored_score is None
    assert kept.reason == (
        "champion v1 could not be re-evaluated (the champion expects a column the new data lacks); keeping it"
    )
    assert _register(registry, kept) == ("2", False) and _champion(registry) == "1"

    # the champion's artifacts are gone (lost volume): a fresh registry cannot load it, so it is kept
    shutil.rmtree(tmp_path / "mlruns")
    lost = judge(ModelRegistry(mlflow_tracking.mlflow), FAMILY, 0.01, lambda champion: 1.0, margin=0.0)
    assert not lost.promote and "could not be re-evaluated (cannot load models:/policy-test@champion" in lost.reason

    # a champion scored NaN cannot be beaten either
    assert not judge(registry, FAMILY, 0.01, lambda champion: float("nan"), margin=0.0).promote


def test_the_forecast_pipeline_keeps_an_unloadable_champion(
    mlflow_tracking: Settings, daily_history: pd.DataFrame, tmp_path: Path
) -> None:
    job = ForecastJob(model="naive", horizon=24, windows=1)
    first = train_forecast(
        mlflow_tracking, daily_history, job, registry=ModelRegistry(mlflow_tracking.mlflow), plots=False
    )
    assert first.promoted
    shutil.rmtree(tmp_path / "mlruns")
    registry = ModelRegistry(mlflow_tracking.mlflow)
    again = train_forecast(mlflow_tracking, daily_history, job, registry=registry, plots=False)
    assert not again.promoted and again.reason.endswith("; keeping it")
    assert math.isnan(again.champion_score)  # type: ignore[arg-type]
    assert "champion_holdout_mase" not in again.metrics and "holdout_mase" in again.metrics
    assert registry.get(FORECAST_FAMILY, CHAMPION).version == first.version  # type: ignore[union-attr]
    assert registry.get(FORECAST_FAMILY, CHAMPION).params["model"] == "naive"  # type: ignore[union-attr]


def test_a_champion_the_registry_refuses_is_replaced(mlflow_tracking: Settings, tmp_path: Path) -> None:
    """A champion whose files fail their digest will never load again: serving holds until the alias moves,
    so the next version replaces it rather than waiting for an operator."""
    registry = ModelRegistry(mlflow_tracking.mlflow)
    _register(registry, judge(registry, FAMILY, 1.0, lambda champion: 1.0, margin=0.0))
    (state,) = (tmp_path / "mlruns").rglob("state.json")
    state.write_text(state.read_text(encoding="utf-8").replace("Naive", "Naive "), encoding="utf-8")
    verdict = judge(ModelRegistry(mlflow_tracking.mlflow), FAMILY, 5.0, lambda champion: 1.0, margin=0.0)
    assert verdict.promote and verdict.champion_version == "1"
    assert verdict.reason.startswith("champion v1 cannot be served (") and "digest" in verdict.reason
    assert _register(registry, verdict) == ("2", True) and _champion(registry) == "2"


def _register_at(registry: ModelRegistry, data_end: str) -> str:
    info = registry.log_model(FAMILY, NaiveForecaster(), params={"data_end": data_end}, pip_requirements=("pandas",))
    registry.promote(FAMILY, info.version)
    return info.version


def test_ties_follow_newer_data_and_age_not_the_same_data(mlflow_tracking: Settings) -> None:
    """Within the tolerance the scores are a tie: newer data or an aged champion promotes, nothing else does."""
    registry = ModelRegistry(mlflow_tracking.mlflow)
    _register_at(registry, "2026-03-08T00:00:00+00:00")
    created = registry.get(FAMILY, CHAMPION).created_unix  # type: ignore[union-attr]
    assert created is not None

    def gate(score: float, data_end: str, *, age_days: float = 1.0) -> Verdict:
        return judge(
            registry,
            FAMILY,
            score,
            lambda champion: 1.0,
            margin=0.0,
            tolerance=0.05,
            data_end=data_end,
            max_age_s=30 * 86400,
            now_unix=created + age_days * 86400,  # type: ignore[operator]
        )

    same, newer = "2026-03-08T00:00:00+00:00", "2026-03-15T00:00:00+00:00"
    assert (gate(1.0, same).promote, gate(1.0, same).decision) == (False, "kept_not_better")
    assert (gate(1.04, newer).promote, gate(1.04, newer).decision) == (True, "newer_data")
    assert gate(1.0, newer).reason.endswith("not worse (within the 5% tolerance) and fitted on newer data; promoted")
    assert (gate(1.06, newer).promote, gate(1.06, newer).decision) == (False, "kept_worse")
    assert (gate(0.94, same).promote, gate(0.94, same).decision) == (True, "better")
    old = gate(1.03, same, age_days=31)
    assert (old.promote, old.decision) == (True, "champion_too_old") and "(31.0 days)" in old.reason
    assert not gate(1.06, same, age_days=31).promote  # an old champion is still not replaced by a worse one


def test_a_precheck_decides_before_any_score(mlflow_tracking: Settings) -> None:
    registry = ModelRegistry(mlflow_tracking.mlflow)
    _register_at(registry, "2026-03-08T00:00:00+00:00")
    scored: list[Any] = []

    def rescore(champion: Any) -> float:
        scored.append(champion)
        return 0.0

    go = judge(registry, FAMILY, 9.0, rescore, margin=0.0, precheck=lambda champion: (True, "it lacks a part"))
    assert (go.promote, go.decision, go.reason) == (True, "champion_incomplete", "it lacks a part")
    stay = judge(registry, FAMILY, 0.0, rescore, margin=0.0, precheck=lambda champion: (False, "we lack it"))
    assert (stay.promote, stay.decision) == (False, "kept_incomplete")
    assert not scored
