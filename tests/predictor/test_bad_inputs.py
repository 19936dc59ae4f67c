"""The bad-input battery: every command that reads a file or a flag, fed something wrong.

Each case runs the real CLI (``predictor.cli.main``) in-process and checks what a user relies on: exactly
one line on stderr naming the problem, exit code 1, and no file written outside the output directory.
Cases with a stated rule instead of an error (an empty node list holds every queue) are at the end.
Inputs are tiny so the battery stays fast.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from predictor.cli import main
from tests.actuators.fake_apiserver import node_object, queue_object

NOW = pd.Timestamp("2026-11-02T10:00:00Z")
Files = dict[str, Path]


def _history(values: list[Any] | None = None, *, times: list[str] | None = None, queue: str = "team-a") -> str:
    hours = pd.date_range(end=pd.Timestamp.now(tz="UTC").floor("h"), periods=48, freq="h")
    stamps = times or [t.isoformat() for t in hours]
    vals = values or [4.0 + (i % 24) / 6 for i in range(len(stamps))]
    rows = [f"{queue},{t},{v}" for t, v in zip(stamps, vals, strict=False)]
    return "series_id,timestamp,value\n" + "\n".join(rows) + "\n"


def _forecast(rows: list[tuple[str, str, float]] | None = None) -> str:
    rows = rows or [("team-a", (NOW + pd.Timedelta(hours=h)).isoformat(), 6.0) for h in range(24)]
    lines = [f"{q},{t},{v},{v - 1},{v + 1},{v - 2},{v + 2}" for q, t, v in rows]
    return "series_id,timestamp,mean,lo-80,hi-80,lo-95,hi-95\n" + "\n".join(lines) + "\n"


def _queues(*objects: dict[str, Any]) -> str:
    opt_in = {"gpu-capacity-predictor/managed": "true"}  # the loop manages only queues that opt in
    items = objects or (queue_object("team-a", deserved=4, capability=8, guarantee=2, allocated=2, annotations=opt_in),)
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)})


def _nodes(*objects: dict[str, Any]) -> str:
    return json.dumps({"kind": "List", "items": list(objects or [node_object(f"n{i}") for i in range(2)])})


def _pods(**spec: Any) -> str:
    """A two-pod 8-GPU gang of team-a (``kubectl get pods -A -o json``); ``spec`` overrides pod spec fields."""

    def pod(name: str) -> dict[str, Any]:
        return {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "labels": {"volcano.sh/queue-name": "team-a", "volcano.sh/job-name": "j"},
            },
            "spec": {"containers": [{"resources": {"requests": {"nvidia.com/gpu": "8"}}}], **spec},
            "status": {"phase": "Pending"},
        }

    return json.dumps({"kind": "List", "items": [pod("p0"), pod("p1")]})


def _quota(field: str, value: Any) -> dict[str, Any]:
    obj = queue_object("team-a", deserved=4, capability=8, guarantee=2, allocated=2)
    if field == "weight":
        obj["spec"]["weight"] = value
    elif field == "guarantee":
        obj["spec"]["guarantee"]["resource"]["nvidia.com/gpu"] = value
    else:
        obj["spec"][field]["nvidia.com/gpu"] = value
    return obj


@pytest.fixture
def files(tmp_path: Path) -> Files:
    """Good inputs; a case overwrites one of them with its bad version."""
    texts = {
        "history.csv": _history(),
        "forecast.csv": _forecast(),
        "queues.json": _queues(),
        "nodes.json": _nodes(),
        "demand.csv": "queue,peak\nteam-a,5\n",
        "pending.csv": _history([2.0] * 48),
        "jobs.csv": "job,gpus\nj1,1\n",
        "pods.json": _pods(),
        "profile.yaml": "name: p\nweights: {}\n",
        "settings.yaml": "loop: {interval_s: 3600}\n",
    }
    paths = {name: tmp_path / name for name in texts}
    for name, text in texts.items():
        paths[name].write_text(text)
    paths["out"] = tmp_path / "out"
    paths["mlflow.yaml"] = tmp_path / "mlflow.yaml"  # a registry that does not exist: must not be created
    paths["mlflow.yaml"].write_text(f"mlflow: {{tracking_uri: 'sqlite:///{tmp_path / 'none.db'}'}}\n")
    paths["settings.yaml"].write_text(
        f"actuators: {{audit_log: {tmp_path / 'out' / 'audit.jsonl'}, plan_dir: {tmp_path / 'out' / 'plans'}}}\n"
    )
    return paths


def plan(f: Files) -> list[str]:
    return [
        "plan",
        "--queues",
        str(f["queues.json"]),
        "--forecast",
        str(f["forecast.csv"]),
        "--out",
        str(f["out"]),
        "--nodes",
        str(f["nodes.json"]),
        "--now",
        NOW.isoformat(),
    ]


def plan_pods(f: Files) -> list[str]:
    return [*plan(f), "--pods", str(f["pods.json"])]


def _node_with(**fields: Any) -> dict[str, Any]:
    obj = node_object("n0")
    for path, value in fields.items():
        part, key = path.split("__")
        obj.setdefault(part, {})[key] = value
    return obj


def loop(f: Files) -> list[str]:
    return [
        "loop",
        "--once",
        "--config",
        str(f["settings.yaml"]),
        "--history",
        str(f["history.csv"]),
        "--queues",
        str(f["queues.json"]),
        "--model",
        "naive",
    ]


def demand(f: Files) -> list[str]:
    return [
        "demand",
        "--config",
        str(f["mlflow.yaml"]),
        "--history",
        str(f["history.csv"]),
        "--pending",
        str(f["pending.csv"]),
        "--out",
        str(f["out"] / "demand.csv"),
    ]


def plan_demand(f: Files) -> list[str]:
    return [*plan(f), "--demand", str(f["demand.csv"])]


def forecast(f: Files) -> list[str]:
    return [
        "forecast",
        "--history",
        str(f["history.csv"]),
        "--out",
        str(f["out"] / "fc.csv"),
        "--horizon",
        "2",
        "--model",
        "naive",
    ]


def backtest(f: Files) -> list[str]:
    return [
        "backtest",
        "--history",
        str(f["history.csv"]),
        "--out",
        str(f["out"] / "bt.csv"),
        "--horizon",
        "2",
        "--windows",
        "1",
        "--model",
        "naive",
    ]


def write(name: str, text: str) -> Callable[[Files], None]:
    return lambda f: f[name].write_text(text)


def _mixed_types_csv(f: Files) -> None:
    """A CSV large enough for pandas to read in chunks, with a column that is numeric in the first chunk and
    text in a later one (what pandas reports as a DtypeWarning when it reads in chunks)."""
    row = ",".join(["0"] * 20) + "\n"
    text = ",".join(f"c{i}" for i in range(20)) + "\n" + row * 40000 + row.replace("0", "x", 2) * 40000
    f["history.csv"].write_text(text)


def add(name: str, text: str) -> Callable[[Files], None]:
    """Append to a good file (the settings keep their output paths under the test's directory)."""
    return lambda f: f[name].write_text(f[name].read_text() + text)


def out_is_a(kind: str, name: str = "") -> Callable[[Files], None]:
    def make(f: Files) -> None:
        target = f["out"] / name if name else f["out"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.mkdir() if kind == "dir" else target.write_text("x")

    return make


CASES: list[tuple[str, Callable[[Files], list[str]], Callable[[Files], None] | None, str]] = [
    # plan: the forecast file
    ("plan-bad-timestamp", plan, write("forecast.csv", _forecast([("team-a", "yesterday", 6.0)])), "timestamp"),
    (
        "plan-forecast-1.7e308",
        plan,
        write(
            "forecast.csv",
            _forecast([("team-a", (NOW + pd.Timedelta(hours=h)).isoformat(), 1.7e308) for h in range(3)]),
        ),
        "above",
    ),
    (
        "plan-forecast-inf",
        plan,
        write("forecast.csv", _forecast([("team-a", NOW.isoformat(), float("inf"))])),
        "infinite",
    ),
    (
        "plan-forecast-duplicate-rows",
        plan,
        write("forecast.csv", _forecast([("team-a", NOW.isoformat(), 6.0), ("team-a", NOW.isoformat(), 7.0)])),
        "two rows",
    ),
    (
        "plan-forecast-escaping-series",
        plan,
        write("forecast.csv", _forecast([("../../escaped", NOW.isoformat(), 6.0)])),
        "not a valid queue name",
    ),
    (
        "plan-forecast-missing-column",
        plan,
        write("forecast.csv", "series_id,timestamp\nteam-a,2026-11-02\n"),
        "missing column",
    ),
    ("plan-forecast-missing-file", plan, lambda f: f["forecast.csv"].unlink(), "no such file"),
    # plan: the queue list
    ("plan-quota-1e400", plan, write("queues.json", _queues(_quota("deserved", "1e400"))), "too large"),
    ("plan-quota-negative", plan, write("queues.json", _queues(_quota("capability", "-4"))), "negative"),
    ("plan-guarantee-negative", plan, write("queues.json", _queues(_quota("guarantee", -1))), "negative"),
    ("plan-weight-1e30-float", plan, write("queues.json", _queues(_quota("weight", 1e30))), "spec.weight"),
    ("plan-weight-1e30-int", plan, write("queues.json", _queues(_quota("weight", 10**30))), "spec.weight"),
    (
        "plan-queue-dotdot",
        plan,
        write("queues.json", _queues(queue_object("../../escaped", deserved=1, capability=2))),
        "not a valid queue name",
    ),
    (
        "plan-queue-absolute",
        plan,
        write("queues.json", _queues(queue_object("/tmp/g19-abs-escaped", deserved=1, capability=2))),
        "not a valid queue name",
    ),
    ("plan-queues-not-json", plan, write("queues.json", "{[oops"), "is not valid JSON"),
    ("plan-queues-not-a-list", plan, write("queues.json", "42"), "expected a List"),
    # plan: nodes, demand, flags, output
    ("plan-allocatable-negative", plan, write("nodes.json", _nodes(node_object("n0", gpus=-8))), "negative"),
    (
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
    (
        "plan-demand-1e308",
        lambda f: [*plan(f), "--demand", str(f["demand.csv"])],
        write("demand.csv", "queue,peak\nteam-a,1e308\n"),
        "demand",
    ),
    (
        "plan-demand-negative",
        lambda f: [*plan(f), "--demand", str(f["demand.csv"])],
        write("demand.csv", "queue,peak\nteam-a,-3\n"),
        "demand",
    ),
    (
        "plan-demand-no-peak",
        plan_demand,
        write("demand.csv", "queue,resource\nteam-a,nvidia.com/gpu\n"),
        "demand.csv: needs a queue",
    ),
    ("plan-demand-text-peak", plan_demand, write("demand.csv", "queue,peak\nteam-a,lots\n"), "demand.csv: column"),
    (
        "plan-demand-queue-twice",
        plan_demand,
        write("demand.csv", "queue,peak\nteam-a,5\nteam-a,3\n"),
        "demand.csv: two rows for queue 'team-a'",
    ),
    ("plan-bad-now", lambda f: [*plan(f)[:-1], "tomorrowish"], None, "--now"),
    ("plan-out-is-a-file", plan, out_is_a("file"), "not a directory"),
    ("plan-plan-json-is-a-dir", plan, out_is_a("dir", "plan.json"), "is a directory"),
    # plan --pods: the pod list (and, with it, node taints and labels)
    ("plan-pods-empty-file", plan_pods, write("pods.json", ""), "pods.json"),
    ("plan-pods-is-a-dir", plan_pods, lambda f: (f["pods.json"].unlink(), f["pods.json"].mkdir()), "directory"),
    ("plan-pods-no-items", plan_pods, write("pods.json", "{}"), "expected a List"),
    ("plan-pods-gpus-negative", plan_pods, write("pods.json", _pods().replace('"8"', '"-8"')), "negative"),
    ("plan-pods-gpus-nan", plan_pods, write("pods.json", _pods().replace('"8"', '"NaN"')), "quantity"),
    ("plan-pods-gpus-1e300", plan_pods, write("pods.json", _pods().replace('"8"', '"1e300"')), "above"),
    (
        "plan-pods-spec-a-list",
        plan_pods,
        write("pods.json", json.dumps({"items": [{"metadata": {"name": "p"}, "spec": [1]}]})),
        "spec",
    ),
    (
        "plan-pods-metadata-a-string",
        plan_pods,
        write("pods.json", json.dumps({"items": [{"metadata": "p"}]})),
        "item 0: metadata",
    ),
    (
        "plan-pods-labels-a-list",
        plan_pods,
        write("pods.json", json.dumps({"items": [{"metadata": {"name": "p", "labels": ["volcano.sh/queue-name"]}}]})),
        "labels",
    ),
    ("plan-pods-containers-a-string", plan_pods, write("pods.json", _pods(containers="gpu")), "containers"),
    ("plan-pods-priority-a-word", plan_pods, write("pods.json", _pods(priority="high")), "spec.priority"),
    ("plan-pods-node-selector-a-string", plan_pods, write("pods.json", _pods(nodeSelector="gpu=a100")), "nodeSelector"),
    ("plan-pods-tolerations-a-string", plan_pods, write("pods.json", _pods(tolerations="gpu")), "tolerations"),
    (
        "plan-pods-toleration-bad-operator",
        plan_pods,
        write("pods.json", _pods(tolerations=[{"key": "gpu", "operator": "Maybe"}])),
        "toleration",
    ),
    (
        "plan-pods-toleration-bad-effect",
        plan_pods,
        write("pods.json", _pods(tolerations=[{"key": "gpu", "operator": "Exists", "effect": "Never"}])),
        "toleration",
    ),
    (
        "plan-pods-taint-without-effect",
        plan_pods,
        write("nodes.json", _nodes(_node_with(spec__taints=[{"key": "gpu"}]))),
        "nodes.json: node 'n0': taint",
    ),
    (
        "plan-pods-taints-a-string",
        plan_pods,
        write("nodes.json", _nodes(_node_with(spec__taints="gpu:NoSchedule"))),
        "taints",
    ),
    (
        "plan-pods-node-labels-a-list",
        plan_pods,
        write("nodes.json", _nodes(_node_with(metadata__labels=["a"]))),
        "labels",
    ),
    (
        "plan-pods-node-allocatable-1e300",
        plan_pods,
        write("nodes.json", _nodes(_node_with(status__allocatable={"nvidia.com/gpu": "1e300"}))),
        "above",
    ),
    (
        "plan-nodes-metadata-a-string",
        plan,
        write("nodes.json", json.dumps({"items": [{"metadata": "n0"}]})),
        "Node object",
    ),
    (
        "plan-nodes-allocatable-a-string",
        plan,
        write("nodes.json", _nodes(_node_with(status__allocatable="8"))),
        "allocatable",
    ),
    # loop --once on files
    ("loop-history-negative", loop, write("history.csv", _history([-3.0] * 48)), "negative"),
    ("loop-history-nan", loop, write("history.csv", _history([*[4.0] * 47, "nan"])), "NaN"),
    ("loop-history-inf", loop, write("history.csv", _history(["inf"] * 48)), "infinite"),
    ("loop-history-bad-timestamp", loop, write("history.csv", _history(times=["soon"] * 48)), "timestamp"),
    (
        "loop-queues-escaping",
        loop,
        write("queues.json", _queues(queue_object("../x", deserved=1, capability=1))),
        "not a valid queue name",
    ),
    ("loop-quota-1e400", loop, write("queues.json", _queues(_quota("deserved", "1e400"))), "too large"),
    ("loop-xdp-without-targets", loop, add("settings.yaml", "loop: {xdp: {enabled: true}}\n"), "loop.xdp.targets"),
    (
        "loop-xdp-capacity-negative",
        loop,
        add("settings.yaml", "loop: {xdp: {enabled: true, targets: [eth1], capacity_bps: -5}}\n"),
        "loop.xdp.capacity_bps",
    ),
    (
        "loop-xdp-capacity-inf",
        loop,
        add("settings.yaml", "loop: {xdp: {enabled: true, targets: [eth1], capacity_bps: .inf}}\n"),
        "loop.xdp.capacity_bps",
    ),
    ("loop-bad-interval", lambda f: [*loop(f), "--interval", "often"], None, "--interval"),
    ("loop-missing-history", loop, lambda f: f["history.csv"].unlink(), "no such file"),
    ("loop-unknown-model", lambda f: [*loop(f), "--model", "nosuch"], None, "unknown forecaster"),
    # predictor demand: the pending-jobs file, the registry
    (
        "demand-pending-missing-column",
        demand,
        write("pending.csv", "series_id,timestamp\nteam-a,2026-11-02\n"),
        "pending.csv: missing column",
    ),
    ("demand-pending-nan", demand, write("pending.csv", _history([*[1.0] * 47, "nan"])), "pending.csv"),
    ("demand-pending-negative", demand, write("pending.csv", _history([-2.0] * 48)), "negative"),
    (
        "demand-pending-is-a-dir",
        demand,
        lambda f: (f["pending.csv"].unlink(), f["pending.csv"].mkdir()),
        "pending.csv: is a directory",
    ),
    ("demand-no-such-registry", demand, None, "no such database file"),
    # forecast and backtest
    ("forecast-history-negative", forecast, write("history.csv", _history([-1.0] * 48)), "negative"),
    ("forecast-history-nan", forecast, write("history.csv", _history(["nan"] * 48)), "NaN"),
    ("forecast-out-is-a-dir", forecast, out_is_a("dir", "fc.csv"), "is a directory"),
    (
        "forecast-out-bad-suffix",
        lambda f: [*forecast(f)[:3], "--out", str(f["out"] / "fc.txt"), *forecast(f)[5:]],
        None,
        "extension",
    ),
    ("forecast-unknown-model", lambda f: [*forecast(f)[:-1], "no-such-model"], None, "no-such-model"),
    ("forecast-history-not-csv", forecast, write("history.csv", "\x00\x01garbage"), "history.csv"),
    ("backtest-history-inf", backtest, write("history.csv", _history(["-inf"] * 48)), "infinite"),
    ("backtest-out-is-a-dir", backtest, out_is_a("dir", "bt.csv"), "is a directory"),
    # rightsize, diagnose, report, export, simulate
    (
        "rightsize-history-negative",
        lambda f: ["rightsize", "--history", str(f["history.csv"]), "--out", str(f["out"] / "rs.csv")],
        write("history.csv", _history([-2.0] * 48)),
        "negative",
    ),
    (
        "rightsize-history-mixed-types",
        lambda f: ["rightsize", "--history", str(f["history.csv"]), "--out", str(f["out"] / "rs.csv")],
        _mixed_types_csv,
        "missing column",
    ),
    (
        "rightsize-missing-history",
        lambda f: ["rightsize", "--history", str(f["out"] / "none.csv"), "--out", str(f["out"] / "rs.csv")],
        None,
        "none.csv",
    ),
    (
        "diagnose-bad-at",
        lambda f: [
            "diagnose",
            "--history",
            str(f["history.csv"]),
            "--at",
            "whenever",
            "--out",
            str(f["out"] / "d.json"),
        ],
        None,
        "--at",
    ),
    (
        "diagnose-missing-history",
        lambda f: [
            "diagnose",
            "--history",
            str(f["out"] / "none.csv"),
            "--at",
            NOW.isoformat(),
            "--out",
            str(f["out"] / "d.json"),
        ],
        None,
        "none.csv",
    ),
    (
        "report-missing-history",
        lambda f: ["report", "--history", str(f["out"] / "nowhere"), "--out", str(f["out"] / "report")],
        None,
        "nowhere",
    ),
    (
        "report-out-is-a-file",
        lambda f: ["report", "--history", str(f["out"].parent), "--out", str(f["out"])],
        out_is_a("file"),
        "not a directory",
    ),
    (
        "export-bad-start",
        lambda f: [
            "export",
            "--query",
            "up",
            "--start",
            "nope",
            "--end",
            NOW.isoformat(),
            "--out",
            str(f["out"] / "e.csv"),
            "--prometheus-url",
            "http://127.0.0.1:9",
        ],
        None,
        "--start",
    ),
    (
        "export-end-before-start",
        lambda f: [
            "export",
            "--query",
            "up",
            "--start",
            NOW.isoformat(),
            "--end",
            (NOW - pd.Timedelta(hours=1)).isoformat(),
            "--out",
            str(f["out"] / "e.csv"),
            "--prometheus-url",
            "http://127.0.0.1:9",
        ],
        None,
        "end",
    ),
    (
        "export-bad-step",
        lambda f: [
            "export",
            "--query",
            "up",
            "--start",
            NOW.isoformat(),
            "--end",
            (NOW + pd.Timedelta(hours=1)).isoformat(),
            "--step",
            "fast",
            "--out",
            str(f["out"] / "e.csv"),
            "--prometheus-url",
            "http://127.0.0.1:9",
        ],
        None,
        "--step",
    ),
    (
        "simulate-missing-jobs",
        lambda f: ["simulate", "--jobs", str(f["out"] / "none.csv"), "--out", str(f["out"] / "sim")],
        None,
        "none.csv",
    ),
    (
        "simulate-bad-jobs",
        lambda f: ["simulate", "--jobs", str(f["jobs.csv"]), "--weeks", "0.01", "--out", str(f["out"] / "sim")],
        write("jobs.csv", "nothing,useful\n1,2\n"),
        "jobs.csv",
    ),
    (
        "simulate-bad-step",
        lambda f: ["simulate", "--synthetic", "--step", "whenever", "--weeks", "0.01", "--out", str(f["out"] / "sim")],
        None,
        "--step",
    ),
    (
        "simulate-out-is-a-file",
        lambda f: ["simulate", "--synthetic", "--weeks", "0.01", "--out", str(f["out"])],
        out_is_a("file"),
        "not a directory",
    ),
    # xdp: the files its commands read (checked before any kernel call)
    (
        "xdp-set-profile-missing",
        lambda f: [
            "xdp",
            "set-profile",
            "--pin-dir",
            str(f["out"] / "pins"),
            "--profile",
            str(f["out"] / "none.yaml"),
            "--dry-run",
        ],
        None,
        "none.yaml",
    ),
    (
        "xdp-set-profile-not-yaml",
        lambda f: [
            "xdp",
            "set-profile",
            "--pin-dir",
            str(f["out"] / "pins"),
            "--profile",
            str(f["profile.yaml"]),
            "--dry-run",
        ],
        write("profile.yaml", "weights: [\n"),
        "profile.yaml",
    ),
    (
        "xdp-agent-config-missing",
        lambda f: ["xdp", "agent", "--agent-config", str(f["out"] / "none.yaml")],
        None,
        "none.yaml",
    ),
]


def _files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


@pytest.mark.parametrize(("args", "spoil", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_gives_one_line_exit_1_and_no_stray_file(
    files: Files,
    capsys: pytest.CaptureFixture[str],
    args: Callable[[Files], list[str]],
    spoil: Callable[[Files], None] | None,
    says: str,
) -> None:
    if spoil is not None:
        spoil(files)
    root = files["out"].parent
    before = _files_under(root)
    code = main(args(files))
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert says.lower() in lines[0].lower(), lines[0]
    stray = {p for p in _files_under(root) - before if files["out"] not in p.parents and p != files["out"]}
    assert stray == set()
    assert not (root.parent / "escaped.yaml").exists() and not Path("/tmp/g19-abs-escaped.yaml").exists()


def test_rule_an_empty_node_list_holds_every_queue(files: Files, capsys: pytest.CaptureFixture[str]) -> None:
    """Not an error: the stated rule (planner.capacity_drop_hold) holds every queue, and says so."""
    files["nodes.json"].write_text(_nodes(node_object("n0", ready=False)))
    assert main(plan(files)) == 0
    held = json.loads((files["out"] / "plan.json").read_text())
    assert held["changes"] == [] and {h["code"] for h in held["held"]} == {"capacity_drop"}
    assert "capacity_drop" in capsys.readouterr().out
