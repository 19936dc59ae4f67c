"""``predictor demo`` end to end at a tiny scale, twice: the second run reuses the history and is safe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from predictor.cli import main
from predictor.commands.demo import STAGES

pytestmark = pytest.mark.slow


def test_demo_runs_twice_and_leaves_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    args = ["demo", "--out", str(out), "--weeks", "3", "--nodes", "2"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "history: done" in first
    for stage in STAGES:  # every stage ran
        assert f"{stage.name}: done" in first or f"{stage.name}: reused" in first
    report = json.loads((out / "report" / "report.json").read_text(encoding="utf-8"))
    assert len(report["queues"]) >= 2
    # The what-if replays the window's jobs under today's and under the recommended quotas, side by side.
    whatif = {w["measure"]: w for w in report["whatif"]}
    assert {"starvation: pending GPU-hours", "quota utilisation (allocated / deserved)"} <= set(whatif)
    assert all(w["verdict"] in ("better", "worse", "same") for w in whatif.values())
    assert (out / "mlflow.db").is_file() and (out / "plans" / "plan.json").is_file()
    assert any((out / "mlruns").iterdir()), "model artifacts belong under DIR, not ./mlruns of the cwd"
    # The loop stage's audit log names the model versions it served, forecast and demand.
    audit = [json.loads(line) for line in (out / "loop" / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    done = [r for r in audit if r["outcome"] == "cycle-done"]
    assert done and done[-1]["models"] == {
        "gpu-demand": "models:/gpu-demand/1",
        "gpu-forecast": "models:/gpu-forecast/1",
    }
    assert all(r["models"] == done[-1]["models"] for r in audit if r["outcome"] == "planned")
    # The loop cycle planned XDP: one agent-inputs file per node, and the audit log names the forecaster.
    assert sorted(p.name for p in (out / "plans" / "xdp").glob("node-*.json")) == ["node-000.json", "node-001.json"]
    assert any(r["code"] == "xdp" and "seasonal_mean_24" in r["reason"] for r in audit)
    # `predictor report --registry` forecasts with the champion the demo registered.
    again = tmp_path / "report"
    uri = f"sqlite:///{out / 'mlflow.db'}"
    assert main(["report", "--history", str(out / "history"), "--registry", uri, "--out", str(again)]) == 0
    capsys.readouterr()
    doc = json.loads((again / "report.json").read_text(encoding="utf-8"))
    assert doc["sources"]["forecast"] == "models:/gpu-forecast/1"
    assert [q["queue"] for q in doc["queues"]] == [q["queue"] for q in report["queues"]]
    assert main(args) == 0
    second = capsys.readouterr().out
    assert "history: reused" in second
    assert "open the report:" in second
