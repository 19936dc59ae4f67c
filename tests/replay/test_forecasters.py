"""What a replayed loop plans from (``--forecaster``): the served ``auto`` goes through the loop's own serving
call, trained as the forecast job trains it; ``naive`` and ``oracle`` give the planner's forecast frame."""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from models.forecast import AutoForecaster
from models.frames import ID, TIME, VALUE
from pipelines.forecast import ForecastJob, make_model
from predictor import sim
from predictor.cli import main
from predictor.commands.forecast import train_forecast_cmd
from predictor.loop import RegistryForecaster
from predictor.loop.inputs import SourceHistory
from predictor.registry import ModelVersionInfo
from predictor.registry.served import ServedModel
from predictor.replay import ReplaySettings, replay
from predictor.replay.forecasters import (
    SERVE_LOOKBACK,
    TRAIN_FREQ,
    TRAIN_HORIZON_H,
    TRAIN_LOOKBACK,
    TRAIN_MODEL,
    NaiveForecaster,
    OracleForecaster,
    ServedAuto,
)

NOW = pd.Timestamp("2026-03-02T00:00Z")
COLUMNS = [ID, TIME, "mean", "lo-80", "hi-80", "lo-95", "hi-95"]


def _history(hours: int = 240) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    times = pd.date_range(end=NOW, periods=hours, freq="h")
    return pd.DataFrame(
        [
            {ID: q, TIME: t, VALUE: max(0.0, level + 4 * np.sin(t.hour / 24 * 2 * np.pi) + rng.normal(0, 1))}
            for q, level in (("team-a", 12.0), ("team-b", 30.0))
            for t in times
        ]
    )


class _Registry:
    """The loop's registry seam holding one model as champion."""

    def __init__(self, served: ServedModel) -> None:
        self.served = served

    def get(self, family: str) -> ModelVersionInfo | None:
        return ModelVersionInfo(family=family, version="1", run_id="run")

    def load(self, family: str) -> ServedModel:
        return self.served


def test_the_training_and_serving_parameters_are_the_forecast_jobs():
    job = ForecastJob()
    assert (job.model, job.horizon, job.freq) == (TRAIN_MODEL, TRAIN_HORIZON_H, TRAIN_FREQ)
    days = inspect.signature(train_forecast_cmd).parameters["days"].default
    assert pd.Timedelta(days=days) == TRAIN_LOOKBACK
    assert pd.Timedelta(hours=inspect.signature(SourceHistory).parameters["lookback_h"].default) == SERVE_LOOKBACK


def test_auto_is_retrained_as_the_job_trains_it_and_served_by_the_loops_call(monkeypatch):
    history = _history()
    auto = ServedAuto()
    auto.retrain(history)
    assert auto.retrains == 1 and not auto.failures
    served = auto.served
    assert served is not None and isinstance(served.estimator, AutoForecaster)
    # the registered configuration: the pipeline's own model at the job's horizon, after the state round trip
    assert served.estimator.get_params() == make_model(TRAIN_MODEL, horizon=TRAIN_HORIZON_H).get_params()

    calls = []
    serve = ServedModel.forecast

    def spy(self, frame, horizon, levels=(80, 95)):
        calls.append((self, len(frame), horizon))
        return serve(self, frame, horizon, levels)

    monkeypatch.setattr(ServedModel, "forecast", spy)
    ours = auto.forecast(history, now=NOW, horizon=25)
    loops, versions = RegistryForecaster(_Registry(served)).forecast(history, horizon=25)
    assert [c[0] for c in calls] == [served, served]  # both through the one serving function
    assert_frame_equal(ours.reset_index(drop=True), loops.reset_index(drop=True))
    assert versions == {"gpu-forecast": "models:/gpu-forecast/1"}
    assert set(ours[ID]) == {"team-a", "team-b"} and ours[TIME].min() == NOW + pd.Timedelta(hours=1)


def test_auto_serves_only_the_loops_lookback_and_never_refits(monkeypatch):
    long = _history(hours=40 * 24)
    auto = ServedAuto()
    auto.retrain(long[long[TIME] > NOW - pd.Timedelta(days=10)])  # short: no network to train in a unit test
    monkeypatch.setattr(AutoForecaster, "fit", lambda *a, **k: pytest.fail("serving must not refit"))
    seen = []
    serve = ServedModel.forecast

    def spy(self, frame, horizon, levels=(80, 95)):
        seen.append(frame)
        return serve(self, frame, horizon, levels)

    monkeypatch.setattr(ServedModel, "forecast", spy)
    auto.forecast(long, now=NOW, horizon=5)
    assert seen[0][TIME].min() > NOW - SERVE_LOOKBACK and seen[0][TIME].max() == NOW


def test_naive_and_oracle_forecast_frames():
    history = _history()
    naive = NaiveForecaster().forecast(history, now=NOW, horizon=6)
    assert list(naive.columns[: len(COLUMNS)]) == COLUMNS and len(naive) == 2 * 6
    last = history[history[TIME] == NOW].set_index(ID)[VALUE]
    first = naive[naive[TIME] == NOW + pd.Timedelta(hours=1)].set_index(ID)["mean"]
    assert first.to_dict() == pytest.approx(last.to_dict())  # persistence: the last hour's demand

    jobs = sim.normalise_jobs(
        pd.DataFrame(
            {"submit_time": [str(NOW + pd.Timedelta(hours=2))], "queue": ["a"], "num_gpus": [4], "duration_s": [7200]}
        )
    )
    oracle = OracleForecaster(jobs, NOW, NOW + pd.Timedelta(days=1), 6).forecast(history, now=NOW, horizon=6)
    assert list(oracle.columns) == COLUMNS and len(oracle) == 6
    # rows are the hours after now; the job holds 4 GPUs from now + 2 h to now + 4 h
    assert oracle["mean"].tolist() == [0, 4, 4, 0, 0, 0]
    assert (oracle["lo-95"] == oracle["hi-95"]).all()


def test_the_replay_records_which_forecaster_planned_and_its_retrains():
    rows = [(-150 + 3 * i, q, 1, 2) for i in range(40) for q in ("a", "b")] + [(1, "a", 2, 3), (2, "b", 1, 2)]
    frame = pd.DataFrame(rows, columns=["h", "queue", "num_gpus", "duration_h"])
    frame["submit_time"] = (NOW + pd.to_timedelta(frame.pop("h"), unit="h")).astype(str)
    frame["duration_s"] = frame.pop("duration_h") * 3600
    jobs = sim.normalise_jobs(frame)
    for name in ("auto", "naive"):
        r = replay(jobs, ReplaySettings(nodes=1, start=NOW, weeks=0.5 / 7, policy="loop", forecaster=name))
        assert r.forecaster == name and r.cycles == 12 and r.held_cycles == 0 and len(r.retrain_s) == 1
    oracle = replay(jobs, ReplaySettings(nodes=1, start=NOW, weeks=0.5 / 7, policy="oracle", forecaster="naive"))
    assert oracle.forecaster == "oracle"  # --policy oracle is loop with the oracle's forecast


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--policy", "loop", "--forecaster", "prophet"], "--forecaster"),
        (["--policy", "oracle", "--forecaster", "naive"], "--policy oracle"),
        # a forecaster a policy never reads is refused, not dropped: the summary would pass for a naive run
        (["--policy", "static-hard", "--forecaster", "naive"], "plans from no forecast"),
    ],
)
def test_a_bad_forecaster_is_one_line(tmp_path, capsys, args, needle):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(f"submit_time,queue,num_gpus,duration_s\n{NOW.isoformat()},a,1,60\n")
    argv = ["replay", "--jobs", str(jobs), "--nodes", "1", "--start", NOW.isoformat(), "--weeks", "0.1"]
    assert main([*argv, "--out", str(tmp_path / "r"), *args]) == 1
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1
