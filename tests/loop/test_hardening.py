"""Hardening: per-queue staleness, the capacity-collapse hold, and queue names that never become paths.

Plan-mode loops over files (``FileCluster``): what is pinned is the planner's decision and the files it
writes, the same in every mode.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from predictor.actuators.volcano import write_plan_dir
from predictor.config import load_settings
from predictor.errors import InputError
from predictor.loop import FileCluster, Loop
from predictor.planner import PlannerSettings, forecast_targets, plan_cycle, queues_from_list
from tests.actuators.fake_apiserver import node_object, queue_object
from tests.support.actuators import resizing

GPU = "nvidia.com/gpu"
NOW = pd.Timestamp("2026-11-02T10:20:00Z")
FRESH = pd.Timedelta(0)


class History:
    """Hourly history per queue, each queue's samples ending ``lag`` before ``now``."""

    def __init__(self, levels: dict[str, tuple[float, pd.Timedelta]]) -> None:
        self.levels = levels

    def history(self, now: pd.Timestamp) -> pd.DataFrame:
        rows = [
            {"series_id": q, "timestamp": t, "value": v}
            for q, (v, lag) in self.levels.items()
            for t in pd.date_range(end=(now - lag).floor("h"), periods=48, freq="h")
        ]
        return pd.DataFrame(rows)


class Flat:
    """Forecasts the last value of each series from ``now`` on, with fixed bands."""

    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        last = history.sort_values("timestamp").groupby("series_id").tail(1)
        rows = [
            {
                "series_id": r.series_id,
                "timestamp": r.timestamp + pd.Timedelta(hours=h),
                "mean": r.value,
                "lo-80": r.value - 2,
                "hi-80": r.value + 2,
                "lo-95": r.value - 4,
                "hi-95": r.value + 4,
            }
            for r in last.itertuples()
            for h in range(horizon + 1)
        ]
        return pd.DataFrame(rows), {"gpu-forecast": "1"}


def queues() -> list[dict[str, Any]]:
    return [
        queue_object("team-a", deserved=4, capability=8, guarantee=4, allocated=2),
        queue_object("team-b", deserved=16, capability=32, guarantee=8, allocated=10),
    ]


def nodes(n: int, *, ready: bool = True) -> dict[str, Any]:
    return {"kind": "List", "items": [node_object(f"n{i}", ready=ready) for i in range(n)]}


def make_loop(tmp_path: Path, history: History, node_doc: dict[str, Any], at: pd.Timestamp = NOW) -> Loop:
    settings = load_settings(
        None, actuators={**resizing("plan"), "audit_log": tmp_path / "audit.jsonl", "plan_dir": tmp_path / "plans"}
    )
    return Loop(settings, cluster=FileCluster(queues(), node_doc), history=history, forecaster=Flat(), clock=lambda: at)


def test_a_queue_whose_history_stopped_is_held_stale_and_the_others_proceed(tmp_path: Path) -> None:
    history = History({"team-a": (12.0, pd.Timedelta(hours=20)), "team-b": (20.0, FRESH)})
    report = make_loop(tmp_path, history, nodes(12)).run_once()
    assert report.plan is not None and report.hold is None
    assert {h.code for h in report.plan.held if h.queue == "team-a"} == {"stale_data"}
    assert not [c for c in report.plan.changes if c.queue == "team-a"]  # guarantee 4 stays 4
    assert [c for c in report.plan.changes if c.queue == "team-b"]


def test_every_queue_stale_holds_the_whole_cycle(tmp_path: Path) -> None:
    old = pd.Timedelta(hours=20)
    report = make_loop(tmp_path, History({"team-a": (12.0, old), "team-b": (20.0, old)}), nodes(12)).run_once()
    assert report.hold is not None and report.hold[0] == "stale_data"
    assert report.plan is not None and report.plan.changes == ()


@pytest.mark.parametrize(
    "after",
    [nodes(12, ready=False), {"kind": "List", "items": []}, nodes(5)],
    ids=["all-unknown", "empty-list", "drop-58pct"],
)
def test_a_capacity_collapse_holds_every_queue_and_keeps_guarantees(tmp_path: Path, after: dict[str, Any]) -> None:
    fresh = History({"team-a": (6.0, FRESH), "team-b": (20.0, FRESH)})
    make_loop(tmp_path, fresh, nodes(12)).run_once()  # records 96 GPUs as the reference
    report = make_loop(tmp_path, fresh, after, at=NOW + pd.Timedelta(hours=2)).run_once()
    assert report.hold is not None and report.hold[0] == "capacity_drop"
    assert report.plan is not None and report.plan.changes == ()
    # The collapse is not taken as the new reference: the next cycle still holds.
    again = make_loop(tmp_path, fresh, after, at=NOW + pd.Timedelta(hours=3)).run_once()
    assert again.hold is not None and again.hold[0] == "capacity_drop"


def test_a_drop_within_the_rule_plans_and_a_lasting_drop_is_accepted(tmp_path: Path) -> None:
    fresh = History({"team-a": (6.0, FRESH), "team-b": (20.0, FRESH)})
    make_loop(tmp_path, fresh, nodes(12)).run_once()
    assert make_loop(tmp_path, fresh, nodes(7), at=NOW + pd.Timedelta(hours=1)).run_once().hold is None  # -42 %
    assert make_loop(tmp_path, fresh, nodes(3), at=NOW + pd.Timedelta(hours=2)).run_once().hold[0] == "capacity_drop"
    later = NOW + pd.Timedelta(hours=2) + pd.Timedelta(seconds=PlannerSettings().capacity_drop_accept_s)
    assert make_loop(tmp_path, fresh, nodes(3), at=later).run_once().hold is None


def test_an_empty_node_list_holds_the_offline_plan_too() -> None:
    frame = Flat().forecast(History({"team-a": (6.0, FRESH)}).history(NOW), horizon=25)[0]
    plan, hold = plan_cycle(queues_from_list(queues()), frame, PlannerSettings(), now=NOW, allocatable={GPU: 0.0})
    assert hold is not None and hold[0] == "capacity_drop" and plan.changes == ()


@pytest.mark.parametrize("name", ["../../escaped", "/tmp/abs", "Team-A", "a/b", "", "x" * 254])
def test_an_invalid_queue_name_is_a_clear_error_where_it_enters(name: str) -> None:
    with pytest.raises(InputError, match="not a valid queue name"):
        queues_from_list([queue_object(name, deserved=1, capability=1)], source="queues.json")
    frame = pd.DataFrame(
        {"series_id": [name], "timestamp": [NOW], "mean": [1.0], "lo-80": [1.0], "hi-80": [1.0], "hi-95": [1.0]}
    )
    with pytest.raises(InputError, match="not a valid queue name"):
        forecast_targets(frame, PlannerSettings(), now=NOW)


def test_plan_files_stay_inside_out_and_unplanned_queues_leave(tmp_path: Path) -> None:
    out = tmp_path / "out"
    frame = Flat().forecast(History({"team-a": (6.0, FRESH), "team-b": (20.0, FRESH)}).history(NOW), horizon=25)[0]
    live = queues()
    plan = plan_cycle(queues_from_list(live), frame, PlannerSettings(), now=NOW).plan
    write_plan_dir(plan, live, out)
    assert sorted(p.name for p in (out / "queues").iterdir()) == ["team-a.yaml", "team-b.yaml"]
    fewer = plan_cycle(queues_from_list(live[:1]), frame, PlannerSettings(), now=NOW).plan
    (out / "queues" / "my-notes.yaml").write_text("mine: 1\n")  # a user's file is not a plan file: it stays
    write_plan_dir(fewer, live[:1], out)
    assert sorted(p.name for p in (out / "queues").iterdir()) == ["my-notes.yaml", "team-a.yaml"]
    assert {c["queue"] for c in json.loads((out / "plan.json").read_text())["changes"]} <= {"team-a"}


def test_a_symlinked_queues_directory_is_refused_and_left_alone(tmp_path: Path) -> None:
    elsewhere, out = tmp_path / "manifests", tmp_path / "out"
    elsewhere.mkdir()
    out.mkdir()
    (elsewhere / "deployment.yaml").write_text("kind: Queue\napiVersion: scheduling.volcano.sh/v1beta1\n")
    (out / "queues").symlink_to(elsewhere)
    frame = Flat().forecast(History({"team-a": (6.0, FRESH)}).history(NOW), horizon=25)[0]
    plan = plan_cycle(queues_from_list(queues()[:1]), frame, PlannerSettings(), now=NOW).plan
    with pytest.raises(InputError, match="symbolic link"):
        write_plan_dir(plan, queues()[:1], out)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["deployment.yaml"]


@pytest.mark.parametrize("name", ["../../escaped", "/tmp/abs-escaped"])
def test_write_plan_dir_refuses_a_name_that_leaves_out(tmp_path: Path, name: str) -> None:
    from dataclasses import replace

    frame = Flat().forecast(History({"team-a": (6.0, FRESH)}).history(NOW), horizon=25)[0]
    plan = plan_cycle(queues_from_list(queues()[:1]), frame, PlannerSettings(), now=NOW).plan
    evil = replace(plan, desired={name: plan.desired["team-a"]})
    before = set(tmp_path.rglob("*"))
    with pytest.raises(InputError):
        write_plan_dir(evil, [], tmp_path / "a" / "b" / "out")
    assert set(tmp_path.rglob("*")) - before <= {tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "out"}
    assert not Path("/tmp/abs-escaped.yaml").exists()
