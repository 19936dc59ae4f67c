"""Step 3 of the fleet bench (``python -m bench.fleet``): one planning cycle and one fleet loop cycle, timed.

``bench_cycles`` times ``predictor.planner.plan_cycle`` per cluster and for the whole fleet; ``bench_loop``
times the fleet loop itself (``predictor.loop.fleet.FleetLoop``, plan mode) over in-memory clusters, with the
plan directories' share of each cycle measured apart. Both build their queues and forecasts with
``cluster_inputs``; neither forecasts (serving is timed in step 2).
"""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from predictor.planner import PlannerSettings, QueueState
from predictor.planner.cycle import plan_cycle

# A simulated cluster's queues carry no opt-in annotation: the benchmark plans them all, writing plan files only.
SIMULATED: dict[str, Any] = {
    "queues": {"writes": "plan", "mode": "apply", "manage": {"all": True}},
    "xdp": {"mode": "plan"},
}

GPU = "nvidia.com/gpu"
# The bench's "now", shared with bench.fleet so every step's data ends at the same hour.
NOW = pd.Timestamp("2026-11-02T00:00:00Z")


def cluster_inputs(names: list[str], gpus: int, rng: np.random.Generator) -> tuple[list[QueueState], pd.DataFrame]:
    """Queues under one team parent per 10 and a 25-hour forecast starting now, as the loop would have."""
    parents = [f"{names[0]}-team-{i}" for i in range(math.ceil(len(names) / 10))]
    queues = [QueueState(name=p, deserved={GPU: float(gpus)}, capability={GPU: float(gpus)}) for p in parents]
    share = gpus / len(names)
    for i, name in enumerate(names):
        d = float(rng.integers(0, int(2 * share) + 1))
        queues.append(
            QueueState(
                name=name,
                parent=parents[i // 10],
                deserved={GPU: d},
                capability={GPU: d + float(rng.integers(0, 8))},
                guarantee={GPU: d // 2},
                allocated={GPU: float(rng.integers(0, int(d) + 1))},
            )
        )
    times = pd.date_range(NOW, periods=25, freq="h")
    mean = np.repeat(rng.gamma(2.0, share / 2, size=len(names)), len(times)) + rng.normal(0, 1, len(names) * 25)
    frame = pd.DataFrame({"series_id": np.repeat(names, len(times)), "timestamp": np.tile(times, len(names))})
    for col, k in (("mean", 0), ("lo-80", -1.3), ("hi-80", 1.3), ("lo-95", -2), ("hi-95", 2)):
        frame[col] = np.maximum(mean + k, 0)
    return queues, frame


def bench_cycles(clusters: int, gpus: int, queues: int, repeats: int = 5) -> tuple[float, float, int]:
    """(median per-cluster cycle s, median fleet cycle s, changed queues in the fleet)."""
    rng = np.random.default_rng(1)
    names = [f"q{i:04d}" for i in range(queues)]
    inputs = [
        cluster_inputs([f"c{c}-{n}" for n in part], gpus, rng)
        for c, part in enumerate(np.array_split(np.array(names), clusters))
    ]
    policy = PlannerSettings()  # type: ignore[call-arg]
    per_cluster, fleet, changed = [], [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        changed = 0
        for qs, frame in inputs:
            t1 = time.perf_counter()
            plan = plan_cycle(qs, frame, policy, now=NOW, allocatable={GPU: float(gpus)})
            per_cluster.append(time.perf_counter() - t1)
            changed += len(plan.plan.changes)
        fleet.append(time.perf_counter() - t0)
    return statistics.median(per_cluster), statistics.median(fleet), changed


class _Precomputed:
    """A forecaster answering with a forecast made beforehand (serving is timed apart, in step 2)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame

    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        return self.frame, {"gpu-forecast": "bench"}


class _FrameHistory:
    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame

    def history(self, now: pd.Timestamp) -> pd.DataFrame:
        return self.frame


def _queue_objects(queues: list[QueueState]) -> list[dict[str, object]]:
    """The queues as ``kubectl get queues -o json`` items (what the loop reads from the API)."""

    def gpus(values: Mapping[str, float]) -> dict[str, str]:
        return {GPU: f"{values[GPU]:g}"} if GPU in values else {}

    return [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": q.name},
            "spec": {
                "weight": 1,
                "reclaimable": True,
                "deserved": gpus(q.deserved),
                "capability": gpus(q.capability),
                "guarantee": {"resource": gpus(q.guarantee)},
                **({"parent": q.parent} if q.parent else {}),
            },
            "status": {"state": "Open", "allocated": gpus(q.allocated)},
        }
        for q in queues
    ]


def bench_loop(clusters: int, gpus: int, queues: int, weeks: int, repeats: int = 5) -> tuple[float, float, float, int]:
    """(median fleet loop cycle s, of which plan files s, median /metrics scrape s, audit records per cycle)."""
    from prometheus_client import generate_latest

    from predictor.actuators.audit import AuditLog
    from predictor.config import load_settings
    from predictor.loop import FileCluster, FileLock, Loop
    from predictor.loop import cycle as loop_cycle
    from predictor.loop.fleet import FleetLoop, QualifiedForecaster, cluster_settings

    writing = [0.0]
    patched = vars(loop_cycle)  # the cycle module's own names: its write_plan_dir is wrapped with a timer
    write_plan_dir = patched["write_plan_dir"]

    def timed_write(*args: Any, **kwargs: Any) -> Path:  # the plan directories' share of the cycle
        t = time.perf_counter()
        try:
            written: Path = write_plan_dir(*args, **kwargs)
            return written
        finally:
            writing[0] += time.perf_counter() - t

    patched["write_plan_dir"] = timed_write

    rng = np.random.default_rng(1)
    names = [f"q{i:04d}" for i in range(queues)]
    hours = min(weeks * 7 * 24, 28 * 24)  # the loop's lookback: 28 days
    times = pd.date_range(NOW.floor("h") - pd.Timedelta(hours=hours - 1), periods=hours, freq="h")
    with tempfile.TemporaryDirectory(prefix="fleet-loop-") as tmp:
        settings = load_settings(
            None, actuators={**SIMULATED, "audit_log": Path(tmp) / "audit.jsonl", "plan_dir": Path(tmp) / "plans"}
        )
        audit = AuditLog(settings.actuators.audit_log)
        lock = FileLock(audit.path.with_name(audit.path.name + ".lock"))
        loops = []
        for c, part in enumerate(np.array_split(np.array(names), clusters)):
            name = f"cluster-{c}"
            qs, forecast = cluster_inputs([str(n) for n in part], gpus, rng)
            history = pd.DataFrame(
                {
                    "series_id": np.repeat(part, hours),
                    "timestamp": np.tile(times, len(part)),
                    "value": rng.gamma(2.0, 4.0, len(part) * hours),
                }
            )
            nodes = {
                "items": [
                    {
                        "metadata": {"name": f"{name}-n{i}"},
                        "status": {"allocatable": {GPU: "8"}, "conditions": [{"type": "Ready", "status": "True"}]},
                    }
                    for i in range(gpus // 8)
                ]
            }
            qualified = forecast.assign(series_id=f"{name}/" + forecast["series_id"])
            loops.append(
                Loop(
                    cluster_settings(settings, name),
                    cluster=FileCluster(_queue_objects(qs), nodes),
                    history=_FrameHistory(history),
                    forecaster=QualifiedForecaster(_Precomputed(qualified), name),
                    clock=lambda: NOW,
                    name=name,
                    lock=lock,
                    audit=audit,
                )
            )
        fleet = FleetLoop(loops, lock=lock)
        cycle_s, files_s, scrape_s, records = [], [], [], 0
        for _ in range(repeats):
            before = len(audit.read())
            writing[0] = 0.0
            t0 = time.perf_counter()
            report = fleet.run_cycle(force=True)
            cycle_s.append(time.perf_counter() - t0)
            files_s.append(writing[0])
            assert not report.failed and all(r.plan is not None for r in report.reports.values()), report.failed
            t1 = time.perf_counter()
            generate_latest(fleet.metrics.registry)
            scrape_s.append(time.perf_counter() - t1)
            records = len(audit.read()) - before
        fleet.close()
    patched["write_plan_dir"] = write_plan_dir
    return statistics.median(cycle_s), statistics.median(files_s), statistics.median(scrape_s), records
