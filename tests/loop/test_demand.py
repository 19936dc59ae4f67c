"""Demand in every plan: the ``gpu-demand`` champion served from a real (sqlite) MLflow registry into a cycle.

A queue whose jobs (running + pending) exceed its forecast is sized by demand and its change says so; a
queue without a pending-jobs series is sized by the forecast and its reason says demand is unknown; every
planned audit record and ``plan.json`` cite the model URIs served; ``predictor demand`` writes the file
``predictor plan --demand`` reads, and the plan it makes matches the loop's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from models.demand_eval import RunDemandModel
from models.demand_features import EARLY_FEATURES, HISTORY_FEATURES
from predictor.actuators.audit import AuditLog
from predictor.cli import main
from predictor.config import Settings, load_settings
from predictor.loop import FileCluster, Loop
from predictor.loop.demand import FileJobs, RegistryDemand
from predictor.registry import DEMAND_FAMILY, ModelRegistry
from tests.support.actuators import resizing
from tests.support.planner_inputs import write_plan_inputs

NOW = pd.Timestamp("2026-11-12T00:00:00Z")
GPU = "nvidia.com/gpu"
BASE = {"team-a": 10.0, "team-b": 44.0}
BURST = 30.0  # team-a's demand in its last hours: 20 GPUs of jobs submitted and pending


def _history() -> pd.DataFrame:
    """Ten days of hourly demand (running + pending) per queue, ending at NOW; team-a bursts at the end."""
    times = pd.date_range(end=NOW, periods=24 * 10, freq="h")
    rng = np.random.default_rng(3)
    rows = []
    for queue, level in BASE.items():
        values = level + rng.normal(0, 0.5, len(times)).round(1)
        if queue == "team-a":
            values[-3:] = BURST
        rows += [{"series_id": queue, "timestamp": t, "value": float(v)} for t, v in zip(times, values, strict=True)]
    return pd.DataFrame(rows)


def _pending() -> pd.DataFrame:
    """Pending GPUs of team-a only: team-b's job series is missing (not zero)."""
    times = pd.date_range(end=NOW, periods=6, freq="h")
    return pd.DataFrame({"series_id": "team-a", "timestamp": times, "value": [0, 0, 0, 20.0, 20.0, 20.0]})


class FileHistoryFrame:
    def history(self, now: pd.Timestamp) -> pd.DataFrame:
        return _history()


class FromBase:
    """A forecast that has not seen the burst: each queue's usual level, ±2/±4 bands, for 24 h."""

    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        rows = [
            {
                "series_id": q,
                "timestamp": NOW + pd.Timedelta(hours=h),
                "mean": v,
                "lo-80": v - 2,
                "hi-80": v + 2,
                "lo-95": v - 4,
                "hi-95": v + 4,
            }
            for q, v in BASE.items()
            for h in range(horizon)
        ]
        return pd.DataFrame(rows), {"gpu-forecast": "7"}


def _fitted_demand_model() -> RunDemandModel:
    rng = np.random.default_rng(0)
    n = 200
    runs = pd.DataFrame({c: rng.normal(size=n) for c in (*HISTORY_FEATURES, *EARLY_FEATURES)})
    runs["y_used_frac"] = np.clip(0.5 + 0.1 * runs["gpu_request"] + rng.normal(0, 0.1, n), 0, 1)
    runs["y_mem_frac"] = np.clip(0.4 + rng.normal(0, 0.1, n), 0, 1)
    times = pd.date_range("2026-10-01", periods=24 * 28, freq="h", tz="UTC")
    daily = np.sin(np.arange(len(times)) * 2 * np.pi / 24)
    queues = pd.concat(
        [
            pd.DataFrame(
                {"series_id": q, "timestamp": times, "demand": level * (1 + 0.2 * daily) + rng.normal(0, 1, len(times))}
            )
            for q, level in (("x", 12.0), ("y", 40.0))
        ]
    )
    return RunDemandModel(max_iter=25).fit(runs).fit_queues(queues)


@pytest.fixture
def champion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A gpu-demand champion in a fresh sqlite registry: (tracking URI, version)."""
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is ./mlruns
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("PREDICTOR_MLFLOW__TRACKING_URI", uri)
    registry = ModelRegistry(load_settings(None).mlflow)
    info = registry.log_model(DEMAND_FAMILY, _fitted_demand_model(), kind="tabular", params={"test": 1})
    registry.promote(DEMAND_FAMILY, info.version)
    return uri, info.version


def _settings(tmp_path: Path) -> Settings:
    return load_settings(
        None,
        actuators={**resizing("plan"), "audit_log": tmp_path / "audit.jsonl", "plan_dir": tmp_path / "plans"},
        planner={"max_step_abs": 64, "max_step_rel": 10},
    )


def _demand_loop(tmp_path: Path) -> Loop:
    """A plan-mode loop over the standard plan inputs, serving the configured registry's demand champion."""
    inputs = write_plan_inputs(tmp_path, NOW)
    (tmp_path / "pending.csv").write_text(_pending().to_csv(index=False))
    settings = _settings(tmp_path)
    demand = RegistryDemand(ModelRegistry(settings.mlflow), FileJobs(tmp_path / "pending.csv"))
    return Loop(
        settings,
        cluster=FileCluster(json.loads(inputs["queues"].read_text()), json.loads(inputs["nodes"].read_text())),
        history=FileHistoryFrame(),
        forecaster=FromBase(),
        clock=lambda: NOW,
        demand=demand,
    )


@pytest.mark.slow
def test_a_cycle_serves_the_demand_champion_and_says_what_set_each_queue(
    champion: tuple[str, str], tmp_path: Path
) -> None:
    _, version = champion
    report = _demand_loop(tmp_path).run_once(force=True)
    assert report.plan is not None and report.hold is None

    served = {"gpu-forecast": "models:/gpu-forecast/7", "gpu-demand": f"models:/gpu-demand/{version}"}
    plan_doc = json.loads((tmp_path / "plans" / "plan.json").read_text())
    assert plan_doc["models"] == served
    planned = [r for r in AuditLog(tmp_path / "audit.jsonl").read() if r["outcome"] == "planned"]
    assert planned and all(r["models"] == served for r in planned)

    changes = {(c.queue, c.field): c for c in report.plan.changes}
    # team-a: its jobs ask for 30 GPUs now, the forecast (not having seen them) 12: demand sets deserved.
    a = changes[("team-a", "deserved")]
    assert a.code == "demand" and a.after >= BURST * 1.1
    assert f"models:/gpu-demand/{version}" in a.reason and "> forecast p80 ahead 11.3" in a.reason
    assert changes[("team-a", "capability")].after >= a.after  # raised with it (here by the ordering rule)
    # team-b: no pending-jobs series, so its demand is unknown: the forecast sets it and the reason says why.
    b = changes[("team-b", "deserved")]
    assert b.code == "forecast" and "demand unknown: no pending-jobs series" in b.reason


@pytest.mark.slow
def test_without_a_demand_champion_every_queue_is_forecast_sized_and_says_demand_is_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PREDICTOR_MLFLOW__TRACKING_URI", f"sqlite:///{tmp_path / 'empty.db'}")
    report = _demand_loop(tmp_path).run_once(force=True)
    assert report.plan is not None and report.hold is None
    deserved = [c for c in report.plan.changes if c.field == "deserved" and c.queue in BASE]
    assert deserved and all(c.code == "forecast" for c in deserved)
    assert all("demand unknown: no champion for gpu-demand" in c.reason for c in deserved)
    assert json.loads((tmp_path / "plans" / "plan.json").read_text())["models"] == {
        "gpu-forecast": "models:/gpu-forecast/7"
    }


@pytest.mark.slow
def test_the_demand_file_round_trips_into_plan_and_matches_the_loop(champion: tuple[str, str], tmp_path: Path) -> None:
    _, version = champion
    inputs = write_plan_inputs(tmp_path, NOW)
    _history().to_csv(tmp_path / "history.csv", index=False)
    _pending().to_csv(tmp_path / "pending.csv", index=False)
    out = tmp_path / "demand.csv"
    assert (
        main(
            [
                "demand",
                "--history",
                str(tmp_path / "history.csv"),
                "--pending",
                str(tmp_path / "pending.csv"),
                "--now",
                NOW.isoformat(),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["queue", "resource", "peak", "now", "quantile", "horizon_h", "model", "timestamp"]
    assert frame["queue"].tolist() == ["team-a"]  # team-b: no job data, no row (unknown, not 0)
    row = frame.iloc[0]
    assert row["peak"] >= row["now"] >= BURST - 1e-9 and row["model"] == f"models:/gpu-demand/{version}"
    assert row["quantile"] == 0.95 and row["horizon_h"] == 24 and row["resource"] == GPU

    config = tmp_path / "settings.yaml"
    config.write_text("planner:\n  max_step_abs: 64\n  max_step_rel: 10\n")
    forecast = FromBase().forecast(pd.DataFrame(), horizon=25)[0]
    forecast.to_csv(tmp_path / "forecast.csv", index=False)
    assert (
        main(
            [
                "plan",
                "--queues",
                str(inputs["queues"]),
                "--nodes",
                str(inputs["nodes"]),
                "--forecast",
                str(tmp_path / "forecast.csv"),
                "--demand",
                str(out),
                "--out",
                str(tmp_path / "offline"),
                "--now",
                NOW.isoformat(),
                "--config",
                str(config),
            ]
        )
        == 0
    )
    offline = json.loads((tmp_path / "offline" / "plan.json").read_text())
    assert offline["models"] == {"gpu-demand": f"models:/gpu-demand/{version}"}
    a = {c["field"]: c for c in offline["changes"] if c["queue"] == "team-a"}
    assert a["deserved"]["code"] == "demand" and a["deserved"]["after"] >= BURST * 1.1
    b = [c for c in offline["changes"] if c["queue"] == "team-b" and c["field"] == "deserved"]
    assert b and b[0]["code"] == "forecast" and "demand unknown: no row for this queue" in b[0]["reason"]


@pytest.mark.slow
def test_predictor_loop_once_with_pending_serves_the_champion(
    champion: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI wiring: `--history` with `--pending` turns the registry's demand model on (plan mode)."""
    _, version = champion
    now = pd.Timestamp.now(tz="UTC").floor("h")
    shift = now - NOW
    inputs = write_plan_inputs(tmp_path, now)
    _history().assign(timestamp=lambda f: f["timestamp"] + shift).to_csv(tmp_path / "history.csv", index=False)
    _pending().assign(timestamp=lambda f: f["timestamp"] + shift).to_csv(tmp_path / "pending.csv", index=False)
    monkeypatch.setenv("PREDICTOR_ACTUATORS__AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    monkeypatch.setenv("PREDICTOR_ACTUATORS__PLAN_DIR", str(tmp_path / "plans"))
    args = [
        "loop",
        "--once",
        "--history",
        str(tmp_path / "history.csv"),
        "--queues",
        str(inputs["queues"]),
        "--model",
        "seasonal_naive_24",
    ]
    assert main([*args, "--pending", str(tmp_path / "pending.csv")]) == 0
    models = json.loads((tmp_path / "plans" / "plan.json").read_text())["models"]
    assert models == {"gpu-demand": f"models:/gpu-demand/{version}", "gpu-forecast": "seasonal_naive_24 (unregistered)"}
    # Without --pending there is no job data: no demand model is served, the forecast plans alone.
    assert main([*args, "--force"]) == 0
    assert json.loads((tmp_path / "plans" / "plan.json").read_text())["models"] == {
        "gpu-forecast": "seasonal_naive_24 (unregistered)"
    }


@pytest.mark.slow
def test_predictor_demand_with_a_champion_that_cannot_load_writes_nothing_and_says_why(
    champion: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The champion's artifacts were deleted: one error line naming the registry, exit 1, no demand file
    (an empty one would read as "every queue unknown" to `plan --demand`)."""
    uri, version = champion
    shutil.rmtree(tmp_path / "mlruns")
    _history().to_csv(tmp_path / "history.csv", index=False)
    _pending().to_csv(tmp_path / "pending.csv", index=False)
    out = tmp_path / "demand.csv"
    code = main(
        [
            "demand",
            "--history",
            str(tmp_path / "history.csv"),
            "--pending",
            str(tmp_path / "pending.csv"),
            "--now",
            NOW.isoformat(),
            "--out",
            str(out),
        ]
    )
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert code == 1 and not out.exists()
    assert len(errors) == 1 and uri in errors[0] and "gpu-demand" in errors[0] and f"v{version}" in errors[0]


def test_plan_demand_rows_for_queues_not_in_the_queue_list_are_left_out_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = write_plan_inputs(tmp_path, NOW)
    FromBase().forecast(pd.DataFrame(), horizon=25)[0].to_csv(tmp_path / "forecast.csv", index=False)
    (tmp_path / "demand.csv").write_text("queue,peak\nteam-a,12\nteam-typo,40\n")
    assert (
        main(
            [
                "plan",
                "--queues",
                str(inputs["queues"]),
                "--forecast",
                str(tmp_path / "forecast.csv"),
                "--demand",
                str(tmp_path / "demand.csv"),
                "--out",
                str(tmp_path / "out"),
                "--now",
                NOW.isoformat(),
            ]
        )
        == 0
    )
    assert "demand for 1 queue(s) not in --queues left out: team-typo" in capsys.readouterr().out
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert "team-typo" not in {c["queue"] for c in plan["changes"]} | {h["queue"] for h in plan["held"]}
