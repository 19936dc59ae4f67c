"""``predictor plan`` (offline, from files) and one loop cycle make the same plan from the same inputs.

Both call ``predictor.planner.plan_cycle``; this pins it end to end: the plan files written by the command
and by a plan-mode cycle (same queues, nodes, forecast and clock) are identical, fresh or stale.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from predictor.cli import main
from predictor.config import load_settings
from predictor.loop import FileCluster, Loop
from tests.support.actuators import resizing
from tests.support.planner_inputs import write_plan_inputs

GPU = "nvidia.com/gpu"
START = pd.Timestamp("2026-11-02T00:00:00Z")


class FixedForecast:
    """The loop's forecaster seam, answering with the forecast file the ``plan`` command reads."""

    def __init__(self, path: Path) -> None:
        frame = pd.read_csv(path)
        self.frame = frame.assign(timestamp=pd.to_datetime(frame["timestamp"], utc=True, format="ISO8601"))

    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        return self.frame.copy(), {"gpu-forecast": "file"}


class FreshHistory:
    """History whose newest sample is ``now``: the loop's own staleness check never holds."""

    def history(self, now: pd.Timestamp) -> pd.DataFrame:
        times = pd.date_range(end=now, periods=24, freq="h")
        return pd.DataFrame(
            [{"series_id": q, "timestamp": t, "value": 1.0} for q in ("team-a", "team-b") for t in times]
        )


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    return write_plan_inputs(tmp_path, START)


def _files(out: Path) -> dict[str, str]:
    """Every plan file; plan.json without ``models`` (the loop knows what it served, a file names no model)."""
    files = {str(p.relative_to(out)): p.read_text() for p in sorted(out.rglob("*")) if p.is_file()}
    doc = json.loads(files["plan.json"])
    doc.pop("models", None)
    files["plan.json"] = json.dumps(doc, indent=2)
    return files


@pytest.mark.parametrize(
    ("at", "hold"),
    [
        (START, None),  # fresh: changes planned
        (START + pd.Timedelta(hours=3), "stale_data"),  # the forecast starts more than stale_after_s (2 h) ago
        (START + pd.Timedelta(days=3), "stale_data"),  # the forecast ends before now
    ],
)
def test_plan_command_and_a_loop_cycle_write_the_same_plan(
    inputs: dict[str, Path], tmp_path: Path, at: pd.Timestamp, hold: str | None
) -> None:
    offline = tmp_path / "offline"
    assert (
        main(
            [
                "plan",
                "--queues",
                str(inputs["queues"]),
                "--forecast",
                str(inputs["forecast"]),
                "--nodes",
                str(inputs["nodes"]),
                "--out",
                str(offline),
                "--now",
                at.isoformat(),
            ]
        )
        == 0
    )

    settings = load_settings(
        None, actuators={**resizing("plan"), "audit_log": tmp_path / "audit.jsonl", "plan_dir": tmp_path / "loop-plans"}
    )
    cluster = FileCluster(json.loads(inputs["queues"].read_text()), json.loads(inputs["nodes"].read_text()))
    loop = Loop(
        settings,
        cluster=cluster,
        history=FreshHistory(),
        forecaster=FixedForecast(inputs["forecast"]),
        clock=lambda: at,
    )
    report = loop.run_once(force=True)

    assert report.plan is not None
    assert (report.hold[0] if report.hold else None) == hold
    assert bool(report.plan.changes) == (hold is None)
    if hold:
        assert {h.code for h in report.plan.held if h.queue in ("team-a", "team-b")} == {hold}
    assert _files(offline) == _files(tmp_path / "loop-plans")
    assert json.loads((tmp_path / "loop-plans" / "plan.json").read_text())["models"] == {"gpu-forecast": "file"}


def test_the_plan_commands_own_config_is_the_global_settings_file(inputs: dict[str, Path], tmp_path: Path) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text("planner:\n  headroom: 0.5\nloop:\n  interval_s: 600\n")  # any section of the one file
    args = ["--queues", str(inputs["queues"]), "--forecast", str(inputs["forecast"]), "--nodes", str(inputs["nodes"])]
    assert main(["--config", str(config), "plan", *args, "--out", str(tmp_path / "global")]) == 0
    assert main(["plan", *args, "--config", str(config), "--out", str(tmp_path / "local")]) == 0
    assert main(["plan", *args, "--out", str(tmp_path / "defaults")]) == 0
    assert _files(tmp_path / "global") == _files(tmp_path / "local") != _files(tmp_path / "defaults")
