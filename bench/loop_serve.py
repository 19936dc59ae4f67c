"""Benchmark one loop cycle that serves a registered ``auto`` champion (LSTM included) for many queues.

Usage, from the repository root:
    python -m bench.loop --served [--queues 1000] [--history-weeks 5] [--cycles 5] [--refits 1]

Setup (not timed): ``--queues`` queues with ``--history-weeks`` of hourly demand (daily and weekly rhythm,
level shifts, drains, noise); ``auto`` (default candidates and selection: the pool of persistence and the global
LSTM) fitted on it and registered in a local sqlite MLflow store as the ``gpu-forecast`` champion. The
LSTM keeps its default architecture (14-day lookback, 64 hidden units, 168-step head) so serving costs
what it costs in production; only its training is shortened (few epochs, strided origins), which changes
the refit baseline's time but not the served cycle's.

Timed, in this run, the same ``Loop.run_once`` (plan mode: forecast, plan, invariants, plan files, audit)
with two forecasters:

* served: ``RegistryForecaster``: the champion loaded from the registry once, then ``update`` on the
  newest history each cycle (the first cycle, which loads the model, is reported on its own);
* refit (what a loop that cannot serve a registered model does): the champion's estimator cloned and
  fitted on the newest history each cycle (``EstimatorForecaster``), i.e. auto's backtest and the LSTM's
  training every hour.

The clock advances one hour per cycle and the history window moves with it. Prints a table with the
median cycle times, how much of each was the forecast and how much the plan files (plan mode writes one
fsynced YAML file per queue), and the ratio to the refit cycle. Goal: a served cycle under 10 s for 1,000
queues on 2 cores.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

# A simulated cluster's queues carry no opt-in annotation: the benchmark plans them all, writing plan files only.
SIMULATED: dict[str, Any] = {
    "queues": {"writes": "plan", "mode": "apply", "manage": {"all": True}},
    "xdp": {"mode": "plan"},
}

HOUR = pd.Timedelta(hours=1)
START = pd.Timestamp("2026-09-07T00:00:00Z")  # a Monday


def demand(queues: int, hours: int, seed: int = 0) -> pd.DataFrame:
    """Hourly GPU demand per queue: level × daily/weekly rhythm, a level shift, a drain, noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(hours)
    level = rng.gamma(2.0, 12.0, size=(queues, 1)) + 1
    daily = 1 + rng.uniform(0, 0.5, (queues, 1)) * np.sin(2 * np.pi * (t + rng.integers(0, 24, (queues, 1))) / 24)
    weekly = 1 - 0.3 * rng.uniform(0, 1, (queues, 1)) * ((t // 24) % 7 >= 5)
    shift_at = rng.integers(hours // 4, hours, (queues, 1))
    shift = 1 + rng.uniform(-0.4, 0.6, (queues, 1)) * (t >= shift_at)
    values = level * daily * weekly * shift + rng.normal(0, 1, (queues, hours)) * np.sqrt(level)
    drain_at = rng.integers(0, hours - 12, queues)
    for i in np.flatnonzero(rng.uniform(size=queues) < 0.2):
        values[i, drain_at[i] : drain_at[i] + 8] = 0.0
    return pd.DataFrame(
        {
            "series_id": np.repeat([f"q{i:04d}" for i in range(queues)], hours),
            "timestamp": np.tile(pd.date_range(START, periods=hours, freq="h"), queues),
            "value": np.maximum(values, 0).ravel(),
        }
    )


class MovingHistory:
    """The loop's ``HistoryReader``: the last ``weeks`` of the full frame up to ``now``."""

    def __init__(self, frame: pd.DataFrame, weeks: float) -> None:
        self.frame, self.span = frame, pd.Timedelta(weeks=weeks)

    def history(self, now: pd.Timestamp) -> pd.DataFrame:
        t = self.frame["timestamp"]
        return self.frame[(t > now - self.span) & (t <= now)].reset_index(drop=True)


def queue_objects(names: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {
                "weight": 1,
                "reclaimable": True,
                "deserved": {"nvidia.com/gpu": "24"},
                "capability": {"nvidia.com/gpu": "64"},
                "guarantee": {"resource": {"nvidia.com/gpu": "0"}},
            },
            "status": {"state": "Open", "allocated": {"nvidia.com/gpu": "12"}},
        }
        for name in names
    ]


def champion(history: pd.DataFrame) -> Any:
    """``auto`` with its default pool (persistence + LSTM); LSTM training shortened, architecture kept."""
    from models.forecast import AutoForecaster

    lstm = {"max_epochs": 2, "sample_stride": 24, "patience": 1}
    return AutoForecaster(windows=1, candidate_params={"lstm": lstm}).fit(history)


class Timed:
    """A forecaster wrapper that records how long each ``forecast`` took (the rest of a cycle is planning,
    the invariant check and the plan files)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.seconds = inner, list[float]()

    def report_to(self, metrics: Any) -> None:  # the loop hands the served model's metrics through
        from predictor.loop.inputs import ReportsServing

        if isinstance(self.inner, ReportsServing):
            self.inner.report_to(metrics)

    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        t0 = time.perf_counter()
        try:
            out: tuple[pd.DataFrame, dict[str, str]] = self.inner.forecast(history, horizon=horizon)
            return out
        finally:
            self.seconds.append(time.perf_counter() - t0)


PLAN_FILES: list[float] = []


def _timed_plan_files() -> None:
    """Record how long the loop's plan-file writer takes (one atomic, fsynced file per queue in plan mode)."""
    from predictor.loop import cycle

    write = cycle.write_plan_dir

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return write(*args, **kwargs)
        finally:
            PLAN_FILES.append(time.perf_counter() - t0)

    cycle.write_plan_dir = timed  # type: ignore[assignment]


def timed_cycles(loop: Any, clock: list[pd.Timestamp], cycles: int) -> list[tuple[float, float, float]]:
    """``(cycle s, forecast s, plan files s)`` of ``cycles`` cycles, one hour apart."""
    times = []
    for _ in range(cycles):
        clock[0] += HOUR
        t0 = time.perf_counter()
        report = loop.run_once(force=True)
        times.append((time.perf_counter() - t0, loop.forecaster.seconds[-1], PLAN_FILES[-1]))
        if report.hold is not None or report.plan is None:
            raise SystemExit(f"cycle at {clock[0]} did not plan: {report.hold}")
    return times


def bench_served(queues: int = 1000, weeks: float = 5.0, cycles: int = 5, refits: int = 1) -> None:
    """Print the served and refit cycle times (see the module docstring)."""
    from predictor.config import load_settings
    from predictor.loop import EstimatorForecaster, FileCluster, Loop, RegistryForecaster
    from predictor.registry import FORECAST_FAMILY, ModelRegistry

    _timed_plan_files()
    hours = int(weeks * 7 * 24)
    frame = demand(queues, hours + cycles + refits + 1)
    train_end = START + (hours - 1) * HOUR
    history = MovingHistory(frame, weeks)
    print(f"\n# Served cycle: {queues} queues, {weeks:g} weeks hourly history, auto champion (default pool)\n")
    t0 = time.perf_counter()
    model = champion(history.history(train_end))
    fit_s = time.perf_counter() - t0
    print(
        f"champion fitted in {fit_s:.0f} s: members {sorted(model.members_)}, "
        f"LSTM {model.members_['lstm'].epochs_} epoch(s)"
    )
    names = sorted(frame["series_id"].unique())
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        root = Path(tmp)
        settings = load_settings(
            None,
            mlflow={"tracking_uri": f"sqlite:///{root / 'mlflow.db'}", "artifact_location": str(root / "artifacts")},
        )
        registry = ModelRegistry(settings.mlflow)
        t0 = time.perf_counter()
        registry.promote(FORECAST_FAMILY, registry.log_model(FORECAST_FAMILY, model).version)
        print(f"registered and promoted in {time.perf_counter() - t0:.1f} s")

        def loop(name: str, forecaster: Any, clock: list[pd.Timestamp]) -> Any:
            s = load_settings(
                None,
                actuators={**SIMULATED, "audit_log": root / name / "audit.jsonl", "plan_dir": root / name / "plans"},
            )
            return Loop(
                s,
                cluster=FileCluster(queue_objects(names)),
                history=history,
                forecaster=Timed(forecaster),
                clock=lambda: clock[0],
            )

        clock = [train_end]
        served = loop("served", RegistryForecaster(ModelRegistry(settings.mlflow)), clock)
        first = timed_cycles(served, clock, 1)[0]
        served_s = timed_cycles(served, clock, cycles)
        clock = [train_end]
        estimator = registry.load(FORECAST_FAMILY).estimator
        refit = loop("refit", EstimatorForecaster(estimator, version="refit"), clock)
        refit_s = timed_cycles(refit, clock, refits)
    rows = [
        ("served: first cycle (loads the champion)", [first]),
        ("served: update + predict", served_s),
        ("refit: clone + fit each cycle (before)", refit_s),
    ]
    base = statistics.median(c[0] for c in refit_s)
    print(
        "\n| cycle | runs | median cycle s | min cycle s | median forecast s | median plan files s "
        "| refit / this (cycle) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, samples in rows:
        med = statistics.median(c[0] for c in samples)
        print(
            f"| {label} | {len(samples)} | {med:.2f} | {min(c[0] for c in samples):.2f} | "
            f"{statistics.median(c[1] for c in samples):.2f} | {statistics.median(c[2] for c in samples):.2f} | "
            f"{base / med:.1f}× |"
        )
    goal = statistics.median(c[0] for c in served_s)
    print(
        f"\nserved cycle median {goal:.2f} s for {queues} queues: {'within' if goal < 10 else 'OVER'} the 10 s goal"
        f" (forecast {statistics.median(c[1] for c in served_s):.2f} s of it, plan files "
        f"{statistics.median(c[2] for c in served_s):.2f} s)"
    )
