"""Time the loop's demand step: the gpu-demand queue-peak regressor served for N queues (28 days hourly).

Usage, from the repository root (about a minute):
    python -m bench.demand_serve [--queues 100 1000] [--repeats 3]

Two ways to build the newest hour's features, same model, same numbers (tests/models/test_demand.py pins
them equal): the baseline runs ``queue_features(serving=True)``'s per-series rolling windows and keeps each
queue's last row (how training builds features); ``EstimatorDemand`` (what the loop serves) reduces the last
week's columns at once. Median seconds per call and the ratio to the baseline, measured in this run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd

from models.demand_eval import RunDemandModel
from models.demand_features import QUEUE_FEATURES, feature_matrix, queue_features
from predictor.loop.demand import EstimatorDemand, FrameJobs

REPO = Path(__file__).resolve().parents[1]

NOW = pd.Timestamp("2026-11-12T00:00:00Z")


def _model() -> RunDemandModel:
    rng = np.random.default_rng(0)
    times = pd.date_range("2026-10-01", periods=24 * 28, freq="h", tz="UTC")
    daily = np.sin(np.arange(len(times)) * 2 * np.pi / 24)
    queues = pd.concat(
        [
            pd.DataFrame(
                {"series_id": q, "timestamp": times, "demand": level * (1 + 0.2 * daily) + rng.normal(0, 1, len(times))}
            )
            for q, level in (("x", 12.0), ("y", 40.0))
        ]
    )
    return RunDemandModel(max_iter=50).fit_queues(queues)


def _inputs(n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    times = pd.date_range(end=NOW, periods=24 * 28, freq="h")
    rng = np.random.default_rng(1)
    history = pd.DataFrame(
        {
            "series_id": np.repeat([f"q{i}" for i in range(n)], len(times)),
            "timestamp": np.tile(times, n),
            "value": rng.gamma(2, 5, n * len(times)),
        }
    )
    pending = history[history["timestamp"] > NOW - pd.Timedelta(hours=3)].assign(value=1.0)
    return history, pending


def _baseline(model: RunDemandModel, history: pd.DataFrame, pending: pd.DataFrame) -> int:
    frame = history.rename(columns={"value": "demand"}).merge(
        pending.rename(columns={"value": "pending"}), on=["series_id", "timestamp"], how="left"
    )
    f = queue_features(frame, pending="pending", serving=True).groupby("series_id").tail(1)
    assert model.queue_model_ is not None
    model.queue_model_.predict(feature_matrix(f, QUEUE_FEATURES))
    return len(f)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model = _model()
    print(f"{'queues':>7} {'baseline s':>11} {'served s':>9} {'ratio':>7}")
    for n in args.queues:
        history, pending = _inputs(n)
        served = EstimatorDemand(model, FrameJobs(pending), version="1")
        base, fast = [], []
        for _ in range(args.repeats):
            t = time.perf_counter()
            rows = _baseline(model, history, pending)
            base.append(time.perf_counter() - t)
            t = time.perf_counter()
            out = served.demand(history, NOW)
            fast.append(time.perf_counter() - t)
            assert rows == len(out.frame) == n
        b, f = statistics.median(base), statistics.median(fast)
        print(f"{n:>7} {b:>11.2f} {f:>9.2f} {b / f:>6.1f}×")


if __name__ == "__main__":
    main()
