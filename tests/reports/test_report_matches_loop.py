"""``predictor report`` recommends what a loop cycle plans on the same inputs: one planning step, not two.

A small simulated cluster gives the history; the same queues file (with a guarantee Volcano's metrics cannot
show), nodes file, forecaster and settings feed a plan-mode loop (warm-up cycles fill its stabilisation
memory and audit log) and the report, which is given the loop's state file and audit log. Every queue's
guarantee, deserved and capability must be equal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from predictor import sim
from predictor.cli import main
from predictor.commands import _loop_parts as parts
from predictor.config import load_settings
from predictor.loop import FileCluster, FileHistory, Loop
from predictor.reports.inputs import inputs_from_directory
from predictor.reports.recommend import queue_objects
from predictor.sources.files import write_frame

GPU = "nvidia.com/gpu"
METRICS = "volcano_queue_*,DCGM_FI_DEV_GPU_UTIL,kube_node_status_allocatable"
MODEL = "seasonal_naive_24"


def _simulated(directory: Path) -> None:
    start = pd.Timestamp("2026-01-05T00:00Z")
    settings = sim.SimSettings(start=start, weeks=1.2, step_s=300, seed=3, metrics=METRICS)
    jobs = sim.synthetic_jobs(start - pd.Timedelta(days=3), start + pd.Timedelta(weeks=2), seed=3, jobs_per_hour=4)
    sim.simulate(jobs, sim.ClusterSpec.uniform(4), settings).write(directory)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("sim")
    _simulated(directory)
    return directory


def _files(history: Path, tmp_path: Path) -> tuple[Path, Path, Path, str]:
    """queues.json (one queue with a guarantee), nodes.json (4 ready 8-GPU nodes), the history CSV."""
    inputs = inputs_from_directory(history)
    objects = queue_objects(inputs)
    guaranteed = str(objects[0]["metadata"]["name"])
    objects[0]["spec"]["guarantee"] = {"resource": {GPU: "2"}}
    queues, nodes = tmp_path / "queues.json", tmp_path / "nodes.json"
    queues.write_text(json.dumps({"kind": "List", "items": objects}))
    ready = {"type": "Ready", "status": "True"}
    node_items = [
        {"metadata": {"name": f"n{i}"}, "status": {"allocatable": {GPU: "8"}, "conditions": [ready]}} for i in range(4)
    ]
    nodes.write_text(json.dumps({"kind": "List", "items": node_items}))
    csv = write_frame(inputs.demand, tmp_path / "history.csv")
    return queues, nodes, csv, guaranteed


def test_report_and_a_loop_cycle_recommend_the_same_quotas(history: Path, tmp_path: Path) -> None:
    queues, nodes, csv, guaranteed = _files(history, tmp_path)
    as_of = inputs_from_directory(history).as_of
    audit = tmp_path / "loop" / "audit.jsonl"
    settings = load_settings(None, actuators={"audit_log": audit, "plan_dir": tmp_path / "plans"})
    clock = [as_of - pd.Timedelta(hours=3)]
    loop = Loop(
        settings,
        cluster=FileCluster(json.loads(queues.read_text()), json.loads(nodes.read_text())),
        history=FileHistory(csv),
        forecaster=parts.forecaster(settings, MODEL),
        clock=lambda: clock[0],
    )
    for hours in (3, 2, 1):  # warm-up: stabilisation memory and planned changes in the audit log
        clock[0] = as_of - pd.Timedelta(hours=hours)
        loop.run_once(force=True)
    state = audit.with_name(audit.name + ".state.json")
    assert state.is_file()

    out = tmp_path / "report"
    args = ["report", "--history", str(history), "--queues", str(queues), "--nodes", str(nodes)]
    args += ["--state", str(state), "--audit-log", str(audit), "--model", MODEL, "--no-rightsize"]
    assert main([*args, "--out", str(out)]) == 0

    clock[0] = as_of
    cycle = loop.run_once(force=True)
    assert cycle.plan is not None and cycle.hold is None
    assert cycle.plan.changes  # a plan that moves quotas, so agreeing means something
    recommended = pd.read_csv(out / "inputs" / "recommendations.csv").set_index("queue")
    assert set(recommended.index) == set(cycle.plan.desired) - {"root"}
    for name, desired in cycle.plan.desired.items():
        if name == "root":
            continue
        for field in ("guarantee", "deserved", "capability"):
            loop_value = desired.get(field).get(GPU)
            if loop_value is None:  # unset: no guarantee is 0 GPUs, no capability is no cap
                loop_value = 0.0 if field == "guarantee" else float("inf")
            report_value = float(recommended[field].to_dict()[name])
            assert report_value == pytest.approx(loop_value), (name, field)
    # The guarantee is the queues file's, not Volcano's metrics' "0".
    quotas = pd.read_csv(out / "inputs" / "quotas.csv").set_index("queue")
    assert quotas["guarantee"].to_dict()[guaranteed] == 2.0
    notes = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert "guarantee is not exported" not in json.dumps(notes)
