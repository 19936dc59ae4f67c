"""The offline planner's input files (queues, nodes, forecast) that the ``plan`` command tests and the
plan-versus-loop test share: two team queues that opt in, root/default, an opted-out queue, 96 GPUs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tests.actuators.fake_apiserver import queue_object

GPU = "nvidia.com/gpu"
OPT_IN = {"gpu-capacity-predictor/managed": "true"}  # the loop manages only queues that opt in


def write_plan_inputs(directory: Path, start: pd.Timestamp) -> dict[str, Path]:
    """``queues.json``, ``nodes.json`` (12 ready 8-GPU nodes) and a 24 h ``forecast.csv`` from ``start``."""
    queues = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            queue_object("root", deserved=0, capability=0),
            queue_object("default", deserved=1, capability=1),
            queue_object("team-a", deserved=16, capability=32, guarantee=4, allocated=10, annotations=OPT_IN),
            queue_object("team-b", deserved=40, capability=48, guarantee=8, allocated=12, annotations=OPT_IN),
            queue_object("frozen", deserved=8, capability=8, managed=False),
        ],
    }
    nodes = {
        "kind": "List",
        "items": [
            {
                "metadata": {"name": f"n{i}"},
                "status": {"allocatable": {GPU: "8"}, "conditions": [{"type": "Ready", "status": "True"}]},
            }
            for i in range(12)
        ],
    }
    rows = [
        {
            "series_id": name,
            "timestamp": (start + pd.Timedelta(hours=h)).isoformat(),
            "mean": level,
            "lo-80": level - 2,
            "hi-80": level + 2,
            "lo-95": level - 4,
            "hi-95": level + 4,
        }
        for name, level in (("team-a", 22.0), ("team-b", 41.0))
        for h in range(24)
    ]
    paths = {
        "queues": directory / "queues.json",
        "nodes": directory / "nodes.json",
        "forecast": directory / "forecast.csv",
    }
    paths["queues"].write_text(json.dumps(queues))
    paths["nodes"].write_text(json.dumps(nodes))
    pd.DataFrame(rows).to_csv(paths["forecast"], index=False)
    return paths
