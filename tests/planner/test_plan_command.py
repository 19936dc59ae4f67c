"""``predictor plan`` end to end on files, as an operator would run it next to kubectl."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from predictor.actuators.schemas import validate_object
from predictor.cli import main
from tests.support.planner_inputs import write_plan_inputs

GPU = "nvidia.com/gpu"
NOW = pd.Timestamp("2026-11-02T00:00:00Z")


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    return write_plan_inputs(tmp_path, NOW)


def test_plan_writes_plan_json_and_valid_desired_queues(inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    rc = main(
        [
            "plan",
            "--queues",
            str(inputs["queues"]),
            "--forecast",
            str(inputs["forecast"]),
            "--nodes",
            str(inputs["nodes"]),
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    plan = json.loads((out / "plan.json").read_text())
    changed = {(c["queue"], c["field"]) for c in plan["changes"]}
    assert ("team-a", "deserved") in changed and all(c["reason"] for c in plan["changes"])
    assert {h["queue"]: h["code"] for h in plan["held"] if "field" not in h} == {
        "root": "protected",
        "default": "protected",
        "frozen": "opted_out",
    }
    assert sorted(p.name for p in (out / "queues").iterdir()) == ["team-a.yaml", "team-b.yaml"]
    desired = yaml.safe_load((out / "queues" / "team-a.yaml").read_text())
    validate_object(desired)
    assert desired["spec"]["deserved"][GPU] == "24" and desired["spec"]["deserved"]["memory"] == "2Ti"
    assert "resourceVersion" not in desired["metadata"]


def test_a_stale_forecast_holds_everything(inputs: dict[str, Path], tmp_path: Path) -> None:
    rc = main(
        [
            "plan",
            "--queues",
            str(inputs["queues"]),
            "--forecast",
            str(inputs["forecast"]),
            "--out",
            str(tmp_path / "o"),
            "--now",
            "2026-11-05T00:00:00Z",
        ]
    )
    assert rc == 0
    plan = json.loads((tmp_path / "o" / "plan.json").read_text())
    assert plan["changes"] == [] and {h["code"] for h in plan["held"]} >= {"stale_data"}


def test_bad_input_is_one_line_naming_the_file(
    inputs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs["queues"].write_text('{"items": [{"kind": "Queue", "metadata": {}}]}')
    rc = main(
        ["plan", "--queues", str(inputs["queues"]), "--forecast", str(inputs["forecast"]), "--out", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert rc == 1 and "queues.json" in err and len(err.strip().splitlines()) == 1


def test_pods_give_the_offline_plan_the_loops_gang_floor(inputs: dict[str, Path], tmp_path: Path) -> None:
    gang = [
        {
            "metadata": {
                "name": f"big-{i}",
                "namespace": "ml",
                "labels": {"volcano.sh/queue-name": "team-a"},
                "annotations": {"scheduling.k8s.io/group-name": "big"},
            },
            "spec": {"containers": [{"resources": {"requests": {GPU: "8"}}}]},
            "status": {"phase": "Pending"},
        }
        for i in range(5)
    ]
    pods = tmp_path / "pods.json"
    pods.write_text(json.dumps({"items": gang}))
    out = tmp_path / "out"
    # The gang floor lifts a capability the forecast sized (planner.borrow: forecast); borrowing idle GPUs
    # (the default) sets capability to the cluster, above any gang that fits.
    config = tmp_path / "settings.yaml"
    config.write_text("planner:\n  borrow: forecast\n")
    rc = main(
        [
            "--config",
            str(config),
            "plan",
            "--queues",
            str(inputs["queues"]),
            "--forecast",
            str(inputs["forecast"]),
            "--nodes",
            str(inputs["nodes"]),
            "--pods",
            str(pods),
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    changes = {(c["queue"], c["field"]): c for c in json.loads((out / "plan.json").read_text())["changes"]}
    capability = changes[("team-a", "capability")]
    assert (capability["before"], capability["after"], capability["code"]) == (32.0, 40.0, "gang_floor")
