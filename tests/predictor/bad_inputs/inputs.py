"""Inputs of the bad-input battery: good files to spoil, spoilers, and the command lines that read them.

Every case starts from the same small set of good inputs (``files``) and overwrites one of them with its bad
version, so a failure names the one thing that is wrong. Inputs are tiny so the battery stays fast.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from tests.actuators.fake_apiserver import node_object, queue_object

NOW = pd.Timestamp("2026-11-02T10:00:00Z")
Files = dict[str, Path]


def history_csv(values: list[Any] | None = None, *, times: list[str] | None = None, queue: str = "team-a") -> str:
    hours = pd.date_range(end=pd.Timestamp.now(tz="UTC").floor("h"), periods=48, freq="h")
    stamps = times or [t.isoformat() for t in hours]
    vals = values or [4.0 + (i % 24) / 6 for i in range(len(stamps))]
    rows = [f"{queue},{t},{v}" for t, v in zip(stamps, vals, strict=False)]
    return "series_id,timestamp,value\n" + "\n".join(rows) + "\n"


def forecast_csv(rows: list[tuple[str, str, float]] | None = None) -> str:
    rows = rows or [("team-a", (NOW + pd.Timedelta(hours=h)).isoformat(), 6.0) for h in range(24)]
    lines = [f"{q},{t},{v},{v - 1},{v + 1},{v - 2},{v + 2}" for q, t, v in rows]
    return "series_id,timestamp,mean,lo-80,hi-80,lo-95,hi-95\n" + "\n".join(lines) + "\n"


def queues_json(*objects: dict[str, Any]) -> str:
    opt_in = {"gpu-capacity-predictor/managed": "true"}  # the loop manages only queues that opt in
    items = objects or (queue_object("team-a", deserved=4, capability=8, guarantee=2, allocated=2, annotations=opt_in),)
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)})


def nodes_json(*objects: dict[str, Any]) -> str:
    return json.dumps({"kind": "List", "items": list(objects or [node_object(f"n{i}") for i in range(2)])})


def pods_json(**spec: Any) -> str:
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


def quota(field: str, value: Any) -> dict[str, Any]:
    obj = queue_object("team-a", deserved=4, capability=8, guarantee=2, allocated=2)
    if field == "weight":
        obj["spec"]["weight"] = value
    elif field == "guarantee":
        obj["spec"]["guarantee"]["resource"]["nvidia.com/gpu"] = value
    else:
        obj["spec"][field]["nvidia.com/gpu"] = value
    return obj


def make_files(tmp_path: Path) -> Files:
    """Good inputs; a case overwrites one of them with its bad version."""
    texts = {
        "history.csv": history_csv(),
        "forecast.csv": forecast_csv(),
        "queues.json": queues_json(),
        "nodes.json": nodes_json(),
        "demand.csv": "queue,peak\nteam-a,5\n",
        "pending.csv": history_csv([2.0] * 48),
        "jobs.csv": "job,gpus\nj1,1\n",
        "pods.json": pods_json(),
        "profile.yaml": "name: p\nweights: {}\n",
        "settings.yaml": "loop: {interval_s: 3600}\n",
        "model.json": "{}",
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


def node_with(**fields: Any) -> dict[str, Any]:
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


def mixed_types_csv(f: Files) -> None:
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


Args = Callable[[Files], list[str]]
Spoil = Callable[[Files], None] | None


def write_bytes(name: str, data: bytes) -> Callable[[Files], None]:
    return lambda f: f[name].write_bytes(data)


def sparse(name: str, size: int) -> Callable[[Files], None]:
    """Make ``name`` a sparse file of ``size`` bytes: larger than a stated maximum, yet no disk used."""

    def make(f: Files) -> None:
        f[name].unlink()
        with f[name].open("wb") as handle:
            handle.truncate(size)

    return make


def nested_json(depth: int) -> str:
    return "[" * depth + "]" * depth


def nested_yaml(depth: int) -> str:
    return "a: " + "[" * depth + "]" * depth + "\n"


def jobs_csv(row: str) -> str:
    return "submit_time,queue,num_gpus,duration_s\n" + row + "\n2026-01-01T01:00:00Z,a,1,3600\n"


def simulate(f: Files) -> list[str]:
    return ["simulate", "--jobs", str(f["jobs.csv"]), "--weeks", "0.01", "--out", str(f["out"] / "sim")]


def replay(f: Files) -> list[str]:
    start = "2026-01-01T00:00:00Z"
    return [
        "replay",
        "--jobs",
        str(f["jobs.csv"]),
        "--nodes",
        "2",
        "--start",
        start,
        "--weeks",
        "0.01",
        "--policy",
        "static-hard",
        "--out",
        str(f["out"] / "replay"),
    ]


def diagnose(f: Files) -> list[str]:
    at = NOW.isoformat()
    return [
        "diagnose",
        "--history",
        str(f["history.csv"]),
        "--at",
        at,
        "--out",
        str(f["out"] / "d.json"),
        "--model",
        str(f["model.json"]),
    ]


# Hourly times in 2300: past what pandas' nanosecond timestamps hold (2262-04-11).
YEAR_2300 = [t.isoformat() for t in pd.date_range("2300-01-01", periods=48, freq="h", unit="s")]


def train(f: Files, family: str, *rest: str) -> list[str]:
    """``predictor --config <a registry that does not exist> train <family> ...``."""
    return ["--config", str(f["mlflow.yaml"]), "train", family, *rest]
