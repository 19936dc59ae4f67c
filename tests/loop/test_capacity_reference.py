"""The capacity-collapse hold cannot be walked around: in small steps, or from an empty state file.

Plan-mode loops over files, one hourly cycle each, sharing one state file (``tests.loop.test_hardening``'s
wiring): what is pinned is whether the cycle holds, and that no guarantee is cut on a collapsed cluster.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from predictor.loop.metrics import LoopMetrics
from predictor.planner import PlannerSettings
from tests.actuators.fake_apiserver import node_object
from tests.loop.test_hardening import FRESH, NOW, History, make_loop

FLEET = 16


def ready_of(ready: int, total: int = FLEET) -> dict[str, Any]:
    """``total`` 8-GPU nodes, the first ``ready`` of them Ready (a NotReady node keeps its status.allocatable)."""
    return {"kind": "List", "items": [node_object(f"n{i}", ready=i < ready) for i in range(total)]}


def test_a_collapse_in_steps_under_the_hold_fraction_still_holds(tmp_path: Path) -> None:
    """16 → 9 → 5 → 3 → 2 → 1 Ready nodes, hourly: each step loses under half of the step before."""
    fresh = History({"team-a": (6.0, FRESH), "team-b": (20.0, FRESH)})
    holds: list[str | None] = []
    for hour, ready in enumerate((16, 9, 5, 3, 2, 1)):
        report = make_loop(tmp_path, fresh, ready_of(ready), at=NOW + pd.Timedelta(hours=hour)).run_once()
        holds.append(report.hold[0] if report.hold else None)
        if ready <= 5:
            assert report.plan is not None and report.plan.changes == (), f"changes planned at {ready} nodes"
    assert holds == [None, None, "capacity_drop", "capacity_drop", "capacity_drop", "capacity_drop"]
    state = json.loads((tmp_path / "audit.jsonl").with_name("audit.jsonl.state.json").read_text())
    assert max(m[1]["nvidia.com/gpu"] for m in state["capacity"]["marks"]) == 16 * 8  # the high-water mark


def test_the_reference_forgets_what_is_older_than_its_window(tmp_path: Path) -> None:
    fresh = History({"team-a": (6.0, FRESH), "team-b": (20.0, FRESH)})
    window = pd.Timedelta(seconds=PlannerSettings().capacity_reference_window_s)
    make_loop(tmp_path, fresh, ready_of(16)).run_once()
    make_loop(tmp_path, fresh, ready_of(9), at=NOW + pd.Timedelta(hours=1)).run_once()  # -44 %: planned
    later = NOW + window + pd.Timedelta(hours=2)  # the 16-node mark has left the window; 9 is the reference
    assert make_loop(tmp_path, fresh, ready_of(9), at=later).run_once().hold is None
    assert make_loop(tmp_path, fresh, ready_of(5), at=later + pd.Timedelta(hours=1)).run_once().hold is None


@pytest.mark.parametrize("ready", [1, 7])
def test_a_first_cycle_on_a_mostly_not_ready_cluster_holds_and_keeps_holding(tmp_path: Path, ready: int) -> None:
    """No state file (a first deploy, a lost volume) and 1 (or 7) of 16 GPU nodes Ready."""
    fresh = History({"team-a": (6.0, FRESH), "team-b": (20.0, FRESH)})
    first = make_loop(tmp_path, fresh, ready_of(ready)).run_once()
    assert first.hold is not None and first.hold[0] == "capacity_drop"
    assert f"{FLEET - ready} of {FLEET} GPU nodes" in first.hold[1]
    assert first.plan is not None and first.plan.changes == ()
    # Nothing recorded while held: the collapsed cluster does not become the reference an hour later.
    again = make_loop(tmp_path, fresh, ready_of(ready), at=NOW + pd.Timedelta(hours=1)).run_once()
    assert again.hold is not None and again.hold[0] == "capacity_drop"
    # Nodes back: planned, and 16 nodes is the reference from then on.
    back = make_loop(tmp_path, fresh, ready_of(FLEET), at=NOW + pd.Timedelta(hours=2)).run_once()
    assert back.hold is None


def test_a_first_cycle_on_a_healthy_cluster_plans(tmp_path: Path) -> None:
    fresh = History({"team-a": (6.0, FRESH), "team-b": (20.0, FRESH)})
    assert make_loop(tmp_path, fresh, ready_of(12)).run_once().hold is None  # 4 of 16 NotReady: 25 %


def test_the_capacity_hold_is_on_metrics(tmp_path: Path) -> None:
    fresh = History({"team-a": (6.0, FRESH), "team-b": (20.0, FRESH)})
    loop = make_loop(tmp_path, fresh, ready_of(16))
    loop.run_once()
    assert _sample(loop.metrics, "predictor_loop_capacity_hold") == 0
    assert _sample(loop.metrics, "predictor_loop_capacity_reference_gpus", resource="nvidia.com/gpu") == 128
    held = make_loop(tmp_path, fresh, ready_of(3), at=NOW + pd.Timedelta(hours=1))
    held.run_once()
    assert _sample(held.metrics, "predictor_loop_capacity_hold") == 1


def _sample(metrics: LoopMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)
