"""Bad inputs of plan: the forecast file, queues, nodes, demand, flags and pod lists."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from predictor.cli import main
from tests.actuators.fake_apiserver import node_object, queue_object
from tests.predictor.bad_inputs.inputs import (
    NOW,
    Args,
    Files,
    Spoil,
    forecast_csv,
    node_with,
    nodes_json,
    out_is_a,
    plan,
    plan_demand,
    plan_pods,
    pods_json,
    queues_json,
    quota,
    write,
)
from tests.predictor.bad_inputs.runner import Case, ids, params, run_case

CASES = [
    # plan: the forecast file
    Case("plan-bad-timestamp", plan, write("forecast.csv", forecast_csv([("team-a", "yesterday", 6.0)])), "timestamp"),
    Case(
        "plan-forecast-1.7e308",
        plan,
        write(
            "forecast.csv",
            forecast_csv([("team-a", (NOW + pd.Timedelta(hours=h)).isoformat(), 1.7e308) for h in range(3)]),
        ),
        "above",
    ),
    Case(
        "plan-forecast-inf",
        plan,
        write("forecast.csv", forecast_csv([("team-a", NOW.isoformat(), float("inf"))])),
        "infinite",
    ),
    Case(
        "plan-forecast-duplicate-rows",
        plan,
        write("forecast.csv", forecast_csv([("team-a", NOW.isoformat(), 6.0), ("team-a", NOW.isoformat(), 7.0)])),
        "two rows",
    ),
    Case(
        "plan-forecast-escaping-series",
        plan,
        write("forecast.csv", forecast_csv([("../../escaped", NOW.isoformat(), 6.0)])),
        "not a valid queue name",
    ),
    Case(
        "plan-forecast-missing-column",
        plan,
        write("forecast.csv", "series_id,timestamp\nteam-a,2026-11-02\n"),
        "missing column",
    ),
    Case("plan-forecast-missing-file", plan, lambda f: f["forecast.csv"].unlink(), "no such file"),
    # plan: the queue list
    Case("plan-quota-1e400", plan, write("queues.json", queues_json(quota("deserved", "1e400"))), "too large"),
    Case("plan-quota-negative", plan, write("queues.json", queues_json(quota("capability", "-4"))), "negative"),
    Case("plan-guarantee-negative", plan, write("queues.json", queues_json(quota("guarantee", -1))), "negative"),
    Case("plan-weight-1e30-float", plan, write("queues.json", queues_json(quota("weight", 1e30))), "spec.weight"),
    Case("plan-weight-1e30-int", plan, write("queues.json", queues_json(quota("weight", 10**30))), "spec.weight"),
    Case(
        "plan-queue-dotdot",
        plan,
        write("queues.json", queues_json(queue_object("../../escaped", deserved=1, capability=2))),
        "not a valid queue name",
    ),
    Case(
        "plan-queue-absolute",
        plan,
        write("queues.json", queues_json(queue_object("/tmp/g19-abs-escaped", deserved=1, capability=2))),
        "not a valid queue name",
    ),
    Case("plan-queues-not-json", plan, write("queues.json", "{[oops"), "is not valid JSON"),
    Case("plan-queues-not-a-list", plan, write("queues.json", "42"), "expected a List"),
    # plan: nodes, demand, flags, output
    Case("plan-allocatable-negative", plan, write("nodes.json", nodes_json(node_object("n0", gpus=-8))), "negative"),
    Case(
        "plan-allocatable-1e400",
        plan,
        write(
            "nodes.json",
            json.dumps(
                {"items": [{"metadata": {"name": "n0"}, "status": {"allocatable": {"nvidia.com/gpu": "1e400"}}}]}
            ),
        ),
        "too large",
    ),
    Case(
        "plan-demand-1e308",
        lambda f: [*plan(f), "--demand", str(f["demand.csv"])],
        write("demand.csv", "queue,peak\nteam-a,1e308\n"),
        "demand",
    ),
    Case(
        "plan-demand-negative",
        lambda f: [*plan(f), "--demand", str(f["demand.csv"])],
        write("demand.csv", "queue,peak\nteam-a,-3\n"),
        "demand",
    ),
    Case(
        "plan-demand-no-peak",
        plan_demand,
        write("demand.csv", "queue,resource\nteam-a,nvidia.com/gpu\n"),
        "demand.csv: needs a queue",
    ),
    Case("plan-demand-text-peak", plan_demand, write("demand.csv", "queue,peak\nteam-a,lots\n"), "demand.csv: column"),
    Case(
        "plan-demand-queue-twice",
        plan_demand,
        write("demand.csv", "queue,peak\nteam-a,5\nteam-a,3\n"),
        "demand.csv: two rows for queue 'team-a'",
    ),
    Case("plan-bad-now", lambda f: [*plan(f)[:-1], "tomorrowish"], None, "--now"),
    Case("plan-out-is-a-file", plan, out_is_a("file"), "not a directory"),
    Case("plan-plan-json-is-a-dir", plan, out_is_a("dir", "plan.json"), "is a directory"),
    # plan --pods: the pod list (and, with it, node taints and labels)
    Case("plan-pods-empty-file", plan_pods, write("pods.json", ""), "pods.json"),
    Case("plan-pods-is-a-dir", plan_pods, lambda f: (f["pods.json"].unlink(), f["pods.json"].mkdir()), "directory"),
    Case("plan-pods-no-items", plan_pods, write("pods.json", "{}"), "expected a List"),
    Case("plan-pods-gpus-negative", plan_pods, write("pods.json", pods_json().replace('"8"', '"-8"')), "negative"),
    Case("plan-pods-gpus-nan", plan_pods, write("pods.json", pods_json().replace('"8"', '"NaN"')), "quantity"),
    Case("plan-pods-gpus-1e300", plan_pods, write("pods.json", pods_json().replace('"8"', '"1e300"')), "above"),
    Case(
        "plan-pods-spec-a-list",
        plan_pods,
        write("pods.json", json.dumps({"items": [{"metadata": {"name": "p"}, "spec": [1]}]})),
        "spec",
    ),
    Case(
        "plan-pods-metadata-a-string",
        plan_pods,
        write("pods.json", json.dumps({"items": [{"metadata": "p"}]})),
        "item 0: metadata",
    ),
    Case(
        "plan-pods-labels-a-list",
        plan_pods,
        write("pods.json", json.dumps({"items": [{"metadata": {"name": "p", "labels": ["volcano.sh/queue-name"]}}]})),
        "labels",
    ),
    Case("plan-pods-containers-a-string", plan_pods, write("pods.json", pods_json(containers="gpu")), "containers"),
    Case("plan-pods-priority-a-word", plan_pods, write("pods.json", pods_json(priority="high")), "spec.priority"),
    Case(
        "plan-pods-node-selector-a-string",
        plan_pods,
        write("pods.json", pods_json(nodeSelector="gpu=a100")),
        "nodeSelector",
    ),
    Case("plan-pods-tolerations-a-string", plan_pods, write("pods.json", pods_json(tolerations="gpu")), "tolerations"),
    Case(
        "plan-pods-toleration-bad-operator",
        plan_pods,
        write("pods.json", pods_json(tolerations=[{"key": "gpu", "operator": "Maybe"}])),
        "toleration",
    ),
    Case(
        "plan-pods-toleration-bad-effect",
        plan_pods,
        write("pods.json", pods_json(tolerations=[{"key": "gpu", "operator": "Exists", "effect": "Never"}])),
        "toleration",
    ),
    Case(
        "plan-pods-taint-without-effect",
        plan_pods,
        write("nodes.json", nodes_json(node_with(spec__taints=[{"key": "gpu"}]))),
        "nodes.json: node 'n0': taint",
    ),
    Case(
        "plan-pods-taints-a-string",
        plan_pods,
        write("nodes.json", nodes_json(node_with(spec__taints="gpu:NoSchedule"))),
        "taints",
    ),
    Case(
        "plan-pods-node-labels-a-list",
        plan_pods,
        write("nodes.json", nodes_json(node_with(metadata__labels=["a"]))),
        "labels",
    ),
    Case(
        "plan-pods-node-allocatable-1e300",
        plan_pods,
        write("nodes.json", nodes_json(node_with(status__allocatable={"nvidia.com/gpu": "1e300"}))),
        "above",
    ),
    Case(
        "plan-nodes-metadata-a-string",
        plan,
        write("nodes.json", json.dumps({"items": [{"metadata": "n0"}]})),
        "Node object",
    ),
    Case(
        "plan-nodes-allocatable-a-string",
        plan,
        write("nodes.json", nodes_json(node_with(status__allocatable="8"))),
        "allocatable",
    ),
    # numbers and times bounded where they enter
    Case("plan-quota-2e6", plan, write("queues.json", queues_json(quota("deserved", "2e6"))), "above 1e+06 GPUs"),
    Case(
        "plan-allocatable-2e6",
        plan,
        write("nodes.json", nodes_json(node_with(status__allocatable={"nvidia.com/gpu": "2e6"}))),
        "1e+06",
    ),
    Case("plan-now-year-3000", lambda f: [*plan(f)[:-1], "3000-01-01T00:00:00Z"], None, "--now"),
    Case(
        "plan-forecast-year-2300",
        plan,
        write("forecast.csv", forecast_csv([("team-a", "2300-01-01T00:00:00Z", 6.0)])),
        "outside",
    ),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("args", "spoil", "says"), params(CASES), ids=ids(CASES))
def test_bad_input(files: Files, capsys: pytest.CaptureFixture[str], args: Args, spoil: Spoil, says: str) -> None:
    run_case(files, capsys, args, spoil, says)


def test_rule_an_empty_node_list_holds_every_queue(files: Files, capsys: pytest.CaptureFixture[str]) -> None:
    """Not an error: the stated rule (planner.capacity_drop_hold) holds every queue, and says so."""
    files["nodes.json"].write_text(nodes_json(node_object("n0", ready=False)))
    assert main(plan(files)) == 0
    held = json.loads((files["out"] / "plan.json").read_text())
    assert held["changes"] == [] and {h["code"] for h in held["held"]} == {"capacity_drop"}
    assert "capacity_drop" in capsys.readouterr().out
