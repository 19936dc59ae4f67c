"""``predictor plan`` end to end on files, as an operator would run it next to kubectl."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from predictor.actuators.schemas import validate_object
from predictor.cli import main
from tests.actuators.fake_apiserver import queue_object

GPU = "nvidia.com/gpu"
NOW = pd.Timestamp("2026-11-02T00:00:00Z")


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    queues = {"apiVersion": "v1", "kind": "List", "items": [
        queue_object("root", deserved=0, capability=0),
        queue_object("default", deserved=1, capability=1),
        queue_object("team-a", deserved=16, capability=32, guarantee=4, allocated=10),
        queue_object("team-b", deserved=40, capability=48, guarantee=8, allocated=12),
        queue_object("frozen", deserved=8, capability=8, managed=False),
    ]}
    nodes = {"kind": "List", "items": [{"metadata": {"name": f"n{i}"}, "status": {
        "allocatable": {GPU: "8"}, "conditions": [{"type": "Ready", "status": "True"}]}} for i in range(12)]}
    rows = [{"series_id": name, "timestamp": (NOW + pd.Timedelta(hours=h)).isoformat(), "mean": level,
             "lo-80": level - 2, "hi-80": level + 2, "lo-95": level - 4, "hi-95": level + 4}
            for name, level in (("team-a", 22.0), ("team-b", 41.0)) for h in range(24)]
    paths = {"queues": tmp_path / "queues.json", "nodes": tmp_path / "nodes.json",
             "forecast": tmp_path / "forecast.csv"}
    paths["queues"].write_text(json.dumps(queues))
    paths["nodes"].write_text(json.dumps(nodes))
    pd.DataFrame(rows).to_csv(paths["forecast"], index=False)
    return paths


def test_plan_writes_plan_json_and_valid_desired_queues(inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    rc = main(["plan", "--queues", str(inputs["queues"]), "--forecast", str(inputs["forecast"]),
               "--nodes", str(inputs["nodes"]), "--out", str(out)])
    assert rc == 0
    plan = json.loads((out / "plan.json").read_text())
    changed = {(c["queue"], c["field"]) for c in plan["changes"]}
    assert ("team-a", "deserved") in changed and all(c["reason"] for c in plan["changes"])
    assert {h["queue"]: h["code"] for h in plan["held"] if "field" not in h} == {
        "root": "protected", "default": "protected", "frozen": "opted_out"}
    assert sorted(p.name for p in (out / "queues").iterdir()) == ["team-a.yaml", "team-b.yaml"]
    desired = yaml.safe_load((out / "queues" / "team-a.yaml").read_text())
    validate_object(desired)
    assert desired["spec"]["deserved"][GPU] == "24" and desired["spec"]["deserved"]["memory"] == "2Ti"
    assert "resourceVersion" not in desired["metadata"]


def test_a_stale_forecast_holds_everything(inputs: dict[str, Path], tmp_path: Path) -> None:
    rc = main(["plan", "--queues", str(inputs["queues"]), "--forecast", str(inputs["forecast"]),
               "--out", str(tmp_path / "o"), "--now", "2026-11-05T00:00:00Z"])
    assert rc == 0
    plan = json.loads((tmp_path / "o" / "plan.json").read_text())
    assert plan["changes"] == [] and {h["code"] for h in plan["held"]} >= {"stale_data"}


def test_bad_input_is_one_line_naming_the_file(inputs: dict[str, Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    inputs["queues"].write_text('{"items": [{"kind": "Queue", "metadata": {}}]}')
    rc = main(["plan", "--queues", str(inputs["queues"]), "--forecast", str(inputs["forecast"]),
               "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 1 and "queues.json" in err and len(err.strip().splitlines()) == 1
