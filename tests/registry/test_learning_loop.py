"""The learning loop closes: scheduled retrains replace the champion the loop serves, without churn.

End to end on a real sqlite MLflow: weekly ``gpu-forecast`` retrains over a history whose demand level
doubles after week 3 replace the champion, a retrain on unchanged data keeps it, and one ``Loop`` object
serves each new champion at its next cycle (no restart). For ``gpu-demand``, a young cluster's first
version has no queue regressor (under eight days of hours), and the first later retrain that has one
replaces it, so the loop's demand is known again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from prometheus_client import generate_latest

from models.frames import ID, TIME, VALUE
from pipelines.demand import DemandJob, train_demand
from pipelines.forecast import ForecastJob, TrainOutcome, train_forecast
from predictor.config import Settings, load_settings
from predictor.loop import FileCluster, Loop, RegistryForecaster
from predictor.loop.demand import FrameJobs, RegistryDemand
from predictor.registry import CHAMPION, DEMAND_FAMILY, FORECAST_FAMILY, ModelRegistry
from predictor.rightsize import RightsizeSettings, from_history, rightsize
from tests.actuators.fake_apiserver import queue_object
from tests.rightsize.conftest import demand_out, demand_run  # noqa: F401 (fixtures: a small simulated cluster)

pytestmark = pytest.mark.slow  # about a minute per test: several trainings and loop cycles each

START = pd.Timestamp("2026-03-02", tz="UTC")
WEEK = pd.Timedelta(days=7)
QUEUES = ("team-a", "team-b")
JOB = ForecastJob(model="seasonal_naive_24", horizon=168, windows=1)


def _history(weeks: int) -> pd.DataFrame:
    """Hourly demand of two queues with a daily cycle; the level doubles after week 3."""
    rng = np.random.default_rng(3)
    t = pd.date_range(START, periods=24 * 7 * weeks, freq="h")
    hours = np.arange(t.size)
    level = np.where(t < START + 3 * WEEK, 1.0, 2.0)
    cycle = 1 + 0.4 * np.sin(2 * np.pi * hours / 24)
    return pd.concat(
        [
            pd.DataFrame({ID: q, TIME: t, VALUE: base * level * cycle + rng.normal(0, 0.5, t.size)})
            for q, base in zip(QUEUES, (12.0, 20.0), strict=True)
        ],
        ignore_index=True,
    )


class Newest:
    """The loop's history: the frame up to the cycle's ``now``."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame

    def history(self, now: pd.Timestamp) -> pd.DataFrame:
        return self.frame.loc[self.frame[TIME] <= now].reset_index(drop=True)


def _served(loop: Loop) -> str:
    text = generate_latest(loop.metrics.registry).decode()
    (line,) = [x for x in text.splitlines() if x.startswith("predictor_loop_served_model_info{")]
    return line.split('uri="')[1].split('"')[0]


def test_weekly_retrains_replace_the_champion_and_the_running_loop_serves_it(
    mlflow_tracking: Settings, tmp_path: Path
) -> None:
    settings = mlflow_tracking
    registry = ModelRegistry(settings.mlflow)
    full = _history(5)
    loop_settings = load_settings(
        None,
        actuators={"audit_log": tmp_path / "audit.jsonl", "plan_dir": tmp_path / "plans"},
        mlflow=settings.mlflow.model_dump(),
    )
    clock = {"now": START + 2 * WEEK - pd.Timedelta(hours=1)}
    cluster = FileCluster([queue_object(q, deserved=20, capability=80) for q in QUEUES])
    loop = Loop(
        loop_settings,
        cluster=cluster,
        history=Newest(full),
        forecaster=RegistryForecaster(ModelRegistry(settings.mlflow)),
        clock=lambda: clock["now"],
    )

    def retrain(weeks: int) -> TrainOutcome:
        return train_forecast(settings, _history(weeks), JOB, registry=registry, plots=False)

    outcomes = {2: retrain(2)}
    assert outcomes[2].promoted and outcomes[2].reason == "no champion yet"
    assert loop.run_once().hold is None
    assert _served(loop) == f"models:/{FORECAST_FAMILY}/{outcomes[2].version}"

    for weeks in (3, 4, 5):
        outcomes[weeks] = outcome = retrain(weeks)
        print(f"week {weeks}: v{outcome.version} promoted={outcome.promoted}: {outcome.reason}")
        assert outcome.promoted, outcome.reason
        assert "fitted on newer data" in outcome.reason or "better" in outcome.reason
        clock["now"] = START + weeks * WEEK - pd.Timedelta(hours=1)
        assert loop.run_once().hold is None
        # the same Loop object, at its next cycle, serves the new champion
        assert _served(loop) == f"models:/{FORECAST_FAMILY}/{outcome.version}"
    text = generate_latest(loop.metrics.registry).decode()
    assert 'predictor_loop_model_age_seconds{family="gpu-forecast"}' in text
    version = outcomes[5].version
    (info,) = [x for x in text.splitlines() if x.startswith("predictor_loop_model_promotion_info{")]
    assert f'version="{version}"' in info and ('decision="newer_data"' in info or 'decision="better"' in info)

    # unchanged data: the retrain ties with the champion fitted on it and does not replace it
    again = retrain(5)
    print(f"week 5 again: v{again.version} promoted={again.promoted}: {again.reason}")
    assert not again.promoted, again.reason
    assert again.reason.endswith("nor fitted on newer data; champion kept")
    assert registry.get(FORECAST_FAMILY, CHAMPION).version == version  # type: ignore[union-attr]
    assert loop.run_once().hold is None and _served(loop) == f"models:/{FORECAST_FAMILY}/{version}"


@pytest.fixture(scope="module")
def runs(demand_out: Path) -> pd.DataFrame:  # noqa: F811
    return rightsize(from_history(demand_out / "metrics"), RightsizeSettings())[1]


def _queue_hours(days: int) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    t = pd.date_range(START, periods=24 * days, freq="h")
    cycle = 1 + 0.3 * np.sin(2 * np.pi * np.arange(t.size) / 24)
    return pd.DataFrame({ID: "team-a", TIME: t, "demand": 16 * cycle + rng.normal(0, 1, t.size)})


def test_a_young_clusters_demand_champion_is_replaced_once_a_queue_regressor_fits(
    mlflow_tracking: Settings, runs: pd.DataFrame
) -> None:
    settings, job = mlflow_tracking, DemandJob(max_iter=20)
    registry = ModelRegistry(settings.mlflow)
    young = train_demand(settings, runs, job, registry=registry, queues=_queue_hours(5))
    assert young.promoted and young.queue_model.startswith("none: no queue has 192 h")

    hours = _queue_hours(12)
    now = hours[TIME].max()
    history = hours.rename(columns={"demand": VALUE})
    pending = pd.DataFrame({ID: ["team-a"], TIME: [now], VALUE: [2.0]})
    demand = RegistryDemand(ModelRegistry(settings.mlflow), FrameJobs(pending))
    before = demand.demand(history, now)
    assert before.frame.empty and "no queue-peak regressor" in before.unknown["team-a"]

    grown = train_demand(settings, runs, job, registry=registry, queues=hours)
    print(f"gpu-demand v{grown.version} promoted={grown.promoted}: {grown.reason}")
    assert grown.promoted and grown.queue_model.startswith("next-24 h peak per queue")
    assert "no queue-peak regressor" in grown.reason
    after = demand.demand(history, now)  # the same reader, next cycle: the new champion, demand known
    assert after.unknown == {} and after.frame["queue"].tolist() == ["team-a"]
    assert after.versions == {DEMAND_FAMILY: grown.version}
