"""A queue's GPU demand over the next hours, at a quantile: the per-queue half of the ``gpu-demand`` model.

The forecast models a queue's demand as a time series; this regressor answers a narrower question the
planner needs every cycle: "how many GPUs will this queue ask for at its busiest over the next
``horizon_h`` hours, given the jobs it holds now (running + pending) and its last week?" It is the
``DemandRegressor`` on ``models.demand_features.queue_features`` (scale-free: every lag is divided by last
week's peak + 1, so one model serves small and large queues), and its answer is never below the GPUs the
queue's jobs already ask for (those jobs exist; a model that forgets them under-sizes the queue).

Training series come from the queue's own demand gauge where a training job has it, else from the run
table (GPUs requested by the runs active in each hour). Pure: no I/O.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from models.demand import DEFAULT_QUANTILE, DemandRegressor
from models.demand_features import QUEUE_FEATURES, feature_matrix, latest_queue_features, queue_features

__all__ = [
    "QUEUE_HORIZON_H",
    "WEEK_H",
    "fit_queue_model",
    "hourly_wide",
    "predict_queue_peaks",
    "queue_hours_from_runs",
]

QUEUE_HORIZON_H = 24
WEEK_H = 168  # hours of history a queue needs before it is predicted (the features' longest window)
MAX_GAP_H = 3  # gaps up to this long are carried forward; a longer one leaves the queue unpredicted


def queue_hours_from_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Hourly ``series_id, timestamp, demand``: GPUs requested by each queue's runs active in the hour."""
    if runs.empty:
        return pd.DataFrame(
            {
                "series_id": pd.Series(dtype=str),
                "timestamp": pd.Series(dtype="datetime64[ns, UTC]"),
                "demand": pd.Series(dtype=float),
            }
        )
    start = pd.to_datetime(runs["start"], utc=True).dt.floor("h")
    end = pd.to_datetime(runs["end"], utc=True).dt.floor("h")
    grid = pd.date_range(start.min(), end.max(), freq="h")
    parts = []
    for queue, idx in runs.groupby(runs["queue"].astype(str), sort=True).groups.items():
        first = grid.searchsorted(start.loc[idx].to_numpy())
        last = grid.searchsorted(end.loc[idx].to_numpy())
        # A difference array: +request from the run's first hour, −request after its last.
        delta = np.zeros(len(grid) + 1)
        np.add.at(delta, first, runs.loc[idx, "gpu_request"].to_numpy(np.float64))
        np.add.at(delta, last + 1, -runs.loc[idx, "gpu_request"].to_numpy(np.float64))
        parts.append(pd.DataFrame({"series_id": str(queue), "timestamp": grid, "demand": np.cumsum(delta)[:-1]}))
    return pd.concat(parts, ignore_index=True)


def hourly_wide(frame: pd.DataFrame, value: str) -> pd.DataFrame:
    """``series_id, timestamp, <value>`` rows as a gap-free hourly table, one column per queue.

    Several samples in an hour: the largest (a peak is what sizes a queue). Gaps up to ``MAX_GAP_H`` hours
    carry the last value forward; longer ones stay NaN, so the queue's week is incomplete.
    """
    hours = pd.to_datetime(frame["timestamp"], utc=True).dt.floor("h")
    values = pd.to_numeric(frame[value], errors="coerce")
    wide = values.groupby([hours.rename("timestamp"), frame["series_id"].astype(str)]).max().unstack()
    grid = pd.date_range(wide.index.min(), wide.index.max(), freq="h")
    return wide.reindex(grid).ffill(limit=MAX_GAP_H)


def fit_queue_model(
    frame: pd.DataFrame, *, quantile: float = DEFAULT_QUANTILE, horizon_h: int = QUEUE_HORIZON_H, max_iter: int = 150
) -> DemandRegressor:
    """Fit the next-``horizon_h`` peak regressor on hourly ``series_id, timestamp, demand[, pending]`` rows."""
    pending = "pending" if "pending" in frame.columns else None
    f = queue_features(frame, pending=pending, horizon=horizon_h)
    if f.empty:
        raise ValueError(
            f"no queue has {WEEK_H + horizon_h} h of hourly demand to learn its next-{horizon_h} h peak from"
        )
    return DemandRegressor(quantile=quantile, max_iter=max_iter).fit(feature_matrix(f, QUEUE_FEATURES), f["y_ratio"])


def predict_queue_peaks(model: DemandRegressor, frame: pd.DataFrame) -> pd.DataFrame:
    """Per queue, from the newest hour: ``series_id, timestamp, peak, now`` (GPUs).

    ``frame``: ``series_id, timestamp, demand[, pending]`` (any step; reduced to hourly peaks). ``now`` is
    the demand of the newest hour (running + pending jobs); ``peak`` is the model's quantile of the next
    hours' peak, never below ``now``. A queue without a complete (gap-free) last week has no row.
    """
    columns = ["series_id", "timestamp", "peak", "now"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    demand = hourly_wide(frame.dropna(subset=["demand"]), "demand")
    pending = (
        hourly_wide(frame.dropna(subset=["pending"]), "pending")
        if "pending" in frame.columns and frame["pending"].notna().any()
        else None
    )
    f = latest_queue_features(demand, pending)
    core = [c for c in QUEUE_FEATURES if c not in ("arrivals24", "pending0")]
    f = f.loc[np.isfinite(f[core].to_numpy(np.float64)).all(axis=1)]
    if f.empty:
        return pd.DataFrame(columns=columns)
    scale = f["scale"].to_numpy(np.float64)
    now = f["lag0"].to_numpy(np.float64) * scale
    peak = np.maximum(model.predict(feature_matrix(f, QUEUE_FEATURES)) * scale, now)
    return pd.DataFrame(
        {
            "series_id": f["series_id"].to_numpy(),
            "timestamp": f["timestamp"].to_numpy(),
            "peak": np.maximum(peak, 0.0),
            "now": now,
        }
    )
