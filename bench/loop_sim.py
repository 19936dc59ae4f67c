"""The simulator seen through the real ``Loop``'s seams, for ``bench.loop``'s Philly replays.

``SimCluster`` stands in for the Volcano queues, ``SimHistory`` for the demand history and ``WeeklyAuto``
for the registered forecaster, so one real loop cycle can run per simulated hour. They sit apart from the
replay driver and its report because they are adapters between two APIs (``predictor.sim`` and
``predictor.loop``), and change when those seams change rather than when the benchmark's runs do.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from predictor import sim
from predictor.planner import QueueState, format_quantity
from predictor.registry import FORECAST_FAMILY

GPU = "nvidia.com/gpu"

# A simulated cluster's queues carry no opt-in annotation: the benchmark plans them all, writing plan files only.
SIMULATED: dict[str, Any] = {
    "queues": {"writes": "plan", "mode": "apply", "manage": {"all": True}},
    "xdp": {"mode": "plan"},
}


def hourly_demand(jobs: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
    """Zero-wait demand per queue and hour (GPUs held by jobs in [submit, submit + duration))."""
    hours = pd.date_range(start, end, freq="h", inclusive="left")
    edges = hours.asi8 // 10**9
    rows = []
    for queue, g in jobs.groupby("queue"):
        s = g["submit"].astype("int64").to_numpy() // 10**9
        e = s + g["duration_s"].to_numpy()
        gpus = g["num_gpus"].to_numpy()
        load = np.zeros(len(hours))
        for i, t0 in enumerate(edges):
            overlap = np.clip(np.minimum(e, t0 + 3600) - np.maximum(s, t0), 0, 3600)
            load[i] = float((overlap * gpus).sum() / 3600)
        rows.append(pd.DataFrame({"series_id": str(queue), "timestamp": hours, "value": load}))
    return pd.concat(rows, ignore_index=True)


def week1_queues(jobs: pd.DataFrame, start: pd.Timestamp, total: int, *, hard: bool) -> list[sim.QueueSpec]:
    """Deserved shares of GPU-time in the week before ``start`` (what a team would set by hand)."""
    week = jobs[(jobs["submit"] >= start - pd.Timedelta(days=7)) & (jobs["submit"] < start)]
    gpu_time = (week["num_gpus"] * week["duration_s"]).groupby(week["queue"]).sum()
    share = gpu_time / gpu_time.sum()
    specs = []
    for name in sorted(jobs["queue"].unique()):
        deserved = max(1.0, math.floor(float(share.get(name, 0.0)) * total))
        specs.append(sim.QueueSpec(str(name), deserved=deserved, capability=deserved if hard else float(total)))
    return specs


class SimCluster:
    """The simulated queues as Volcano Queue objects (live, or a shadow copy that plans are applied to)."""

    def __init__(self, specs: list[sim.QueueSpec], total: int) -> None:
        self.total = total
        self.quota = {s.name: [0.0, s.deserved, s.capability] for s in specs}  # guarantee, deserved, capability
        self.sched: Any = None
        self.version = 0

    def queue_objects(self) -> list[dict[str, Any]]:
        allocated = self.sched.allocated
        out = []
        for name, (g, d, c) in self.quota.items():
            spec: dict[str, Any] = {
                "deserved": {GPU: format_quantity(d)},
                "guarantee": {"resource": {GPU: format_quantity(g)}},
            }
            if math.isfinite(c):
                spec["capability"] = {GPU: format_quantity(c)}
            out.append(
                {
                    "metadata": {"name": name, "resourceVersion": str(self.version)},
                    "spec": spec,
                    "status": {"allocated": {GPU: str(allocated.get(name, 0))}},
                }
            )
        return out

    def allocatable(self, resources: Any) -> dict[str, float]:
        return {GPU: float(self.total)}

    def gpu_nodes_not_ready(self, resources: Any) -> tuple[int, int]:
        """Simulated nodes are never NotReady or cordoned: none, of every node (8 GPUs each, as simulated)."""
        return 0, math.ceil(self.total / 8)

    def take(self, desired: dict[str, QueueState]) -> dict[str, tuple[float | None, float | None]]:
        changed: dict[str, tuple[float | None, float | None]] = {}
        for name, state in desired.items():
            new = [state.guarantee.get(GPU, 0.0), state.deserved.get(GPU, 0.0), state.capability.get(GPU, math.inf)]
            if new != self.quota[name]:
                changed[name] = (new[1], new[2])
                self.quota[name] = new
        self.version += 1
        return changed


class SimHistory:
    """Seeded with zero-wait demand before the replay, then the observed request (allocated + pending)."""

    def __init__(self, seed: pd.DataFrame) -> None:
        self.rows = [seed]
        self.frame = seed

    def observe(self, t: pd.Timestamp, sched: Any) -> None:
        alloc, pend = sched.allocated, sched.pending
        self.rows.append(
            pd.DataFrame(
                {"series_id": list(alloc), "timestamp": t, "value": [float(alloc[q] + pend[q]) for q in alloc]}
            )
        )
        self.frame = pd.concat(self.rows, ignore_index=True)
        self.rows = [self.frame]

    def history(self, now: pd.Timestamp) -> pd.DataFrame:
        return self.frame[self.frame["timestamp"] <= now]


class WeeklyAuto:
    """``auto`` retrained weekly; its chosen models are refitted on the newest history and blended.

    The refit runs every ``refresh_h`` hours with a horizon that long-er, so each hourly cycle still sees a
    full planning horizon from a forecast at most ``refresh_h`` − 1 hours old (keeps the replay affordable).
    """

    def __init__(self, refresh_h: int = 3) -> None:
        self.weights: dict[str, dict[str, float]] = {}
        self.version = "none"
        self.retrains = 0
        self.refresh_h = refresh_h
        self.cached: tuple[pd.Timestamp, pd.DataFrame] | None = None

    def retrain(self, history: pd.DataFrame, label: str) -> None:
        from models.forecast.auto import AutoForecaster

        auto = AutoForecaster(candidates=("naive", "drift", "seasonal_naive_24"), windows=2, step=24, horizon=24)
        auto.fit(history)
        self.weights = {sid: dict(plan.weights) for sid, plan in auto.states_.items()}
        self.version, self.retrains, self.cached = label, self.retrains + 1, None

    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        newest = history["timestamp"].max()
        if self.cached is not None and newest - self.cached[0] < pd.Timedelta(hours=self.refresh_h):
            return self.cached[1], {FORECAST_FAMILY: self.version}
        frame = self._refit(history, horizon + self.refresh_h)
        self.cached = (newest, frame)
        return frame, {FORECAST_FAMILY: self.version}

    def _refit(self, history: pd.DataFrame, horizon: int) -> pd.DataFrame:
        from models.forecast import forecasters

        models = sorted({m for w in self.weights.values() for m in w})
        preds = {
            m: forecasters.create(m).fit(history).predict(horizon).set_index(["series_id", "timestamp"]) for m in models
        }
        parts = []
        for sid, weights in self.weights.items():
            blend = sum(w * preds[m].loc[sid] for m, w in weights.items())
            parts.append(blend.assign(series_id=sid).reset_index())
        return pd.concat(parts, ignore_index=True)
