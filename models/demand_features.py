"""Feature tables for the demand regressors, built without looking into the future.

Per run: its request, its group's history (only runs that had *ended* before it started, so the backtest
never sees tomorrow's usage), its first minutes of usage where available, GPU type and calendar.
Targets are scale-free (busy GPUs / request, peak memory / GPU memory) so a model trained on one job mix
transfers to another. Per queue: lags of hourly demand, pending GPUs, arrivals and calendar, with the
next-24 h peak as target, normalised by the last week's peak so small and large queues share one model.
The rule baselines (VPA, KRR) are computed here from the same history columns the model sees.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from models.demand import HEADROOM

__all__ = [
    "EARLY_FEATURES",
    "HISTORY_FEATURES",
    "QUEUE_FEATURES",
    "TARGETS",
    "feature_matrix",
    "latest_queue_features",
    "queue_features",
    "run_features",
]

HISTORY_FEATURES = (
    "gpu_request",
    "log_request",
    "gpu_mem_total_gib",
    "hour",
    "dow",
    "q_n",
    "q_used_p90",
    "q_used_max",
    "q_used_mean",
    "q_mem_p90",
    "q_mem_max",
    "q_mem_mean",
    "w_n",
    "w_used_max",
    "w_mem_max",
)
EARLY_FEATURES = ("early_used_frac", "early_mem_frac", "early_util_mean")
QUEUE_FEATURES = (
    "lag0",
    "max24",
    "mean24",
    "std24",
    "max168",
    "mean168",
    "arrivals24",
    "pending0",
    "log_scale",
    "hour",
    "dow",
)


def _prior_stats(
    start: np.ndarray, end: np.ndarray, values: np.ndarray, groups: np.ndarray, quantile: float
) -> tuple[np.ndarray, ...]:
    """Per row: count, p-quantile, max and mean of ``values`` over rows of the same group ended before it."""
    n = len(start)
    out = [np.full(n, np.nan) for _ in range(4)]
    out[0] = np.zeros(n)
    for group in pd.unique(groups):
        idx = np.flatnonzero(groups == group)
        order = idx[np.argsort(end[idx], kind="stable")]
        ends, vals = end[order], values[order]
        # For each row: how many of the group's runs had ended before it started.
        k = np.searchsorted(ends, start[idx], side="left")
        for row, count in zip(idx, k, strict=True):
            if count == 0:
                continue
            seen = vals[:count]
            seen = seen[np.isfinite(seen)]
            if seen.size == 0:
                continue
            out[0][row] = seen.size
            out[1][row] = np.quantile(seen, quantile)
            out[2][row] = seen.max()
            out[3][row] = seen.mean()
    return tuple(out)


TARGETS = {"busy": ("gpus_used_p95", "early_gpus_used"), "equiv": ("gpu_equiv_p95", "early_gpu_equiv")}


def run_features(runs: pd.DataFrame, target: str = "busy") -> pd.DataFrame:
    """Features, targets and rule baselines per run (rows aligned with ``runs``).

    ``target`` "busy" counts GPUs above the utilisation threshold (what whole-GPU requests should
    follow); "equiv" sums utilisation into GPU-equivalents (what a GPU-sharing setup can pack).

    ``runs`` needs ``namespace, workload, queue, start, end, gpu_request, gpus_used_p95, mem_peak_mib,
    gpu_mem_total_mib, early_gpus_used, early_mem_peak_mib, early_util_mean``.
    """
    if target not in TARGETS:
        raise ValueError(f"unknown demand target {target!r} (known: {', '.join(TARGETS)})")
    used_col, early_col = TARGETS[target]
    r = runs.reset_index(drop=True)
    request = r["gpu_request"].to_numpy(np.float64)
    total = r["gpu_mem_total_mib"].to_numpy(np.float64)
    # GPU memory unknown (no model name): the largest value seen stands in for the card's size.
    total = np.where(np.isfinite(total), total, np.nanmax(r["mem_peak_mib"].to_numpy(np.float64)))
    safe_req = np.maximum(request, 1e-9)
    used_frac = r[used_col].to_numpy(np.float64) / safe_req
    mem_frac = r["mem_peak_mib"].to_numpy(np.float64) / total
    start = r["start"].astype("int64").to_numpy()
    end = r["end"].astype("int64").to_numpy()
    queue = r["queue"].astype(str).to_numpy()
    workload = (r["namespace"].astype(str) + "/" + r["workload"].astype(str)).to_numpy()
    f = pd.DataFrame(index=r.index)
    f["gpu_request"] = request
    f["log_request"] = np.log2(np.maximum(request, 1e-3))
    f["gpu_mem_total_gib"] = total / 1024
    f["hour"] = r["start"].dt.hour.to_numpy()
    f["dow"] = r["start"].dt.day_of_week.to_numpy()
    q_used = _prior_stats(start, end, used_frac, queue, 0.9)
    q_mem = _prior_stats(start, end, mem_frac, queue, 0.9)
    w_used = _prior_stats(start, end, used_frac, workload, 0.9)
    w_mem = _prior_stats(start, end, mem_frac, workload, 0.9)
    f["q_n"], f["q_used_p90"], f["q_used_max"], f["q_used_mean"] = q_used
    f["q_mem_p90"], f["q_mem_max"], f["q_mem_mean"] = q_mem[1], q_mem[2], q_mem[3]
    f["w_n"], f["w_used_max"], f["w_mem_max"] = w_used[0], w_used[2], w_mem[2]
    f["early_used_frac"] = r[early_col].to_numpy(np.float64) / safe_req
    f["early_mem_frac"] = r["early_mem_peak_mib"].to_numpy(np.float64) / total
    f["early_util_mean"] = r["early_util_mean"].to_numpy(np.float64)
    f["y_used_frac"] = used_frac
    f["y_used"] = r[used_col].to_numpy(np.float64)
    f["y_mem_frac"] = mem_frac
    # Rules on the same history, preferring the workload's own runs (what VPA/KRR see per controller)
    # and falling back to its queue's; with no history at all the rule leaves the request as it is.
    w_n, w_p90 = w_used[0], w_used[1]
    f["vpa_used_frac"] = np.where(w_n > 0, w_p90, q_used[1]) * (1 + HEADROOM)
    f["krr_used_frac"] = np.where(w_n > 0, w_used[2], q_used[2]) * (1 + HEADROOM)
    f["vpa_mem_frac"] = np.where(w_mem[0] > 0, w_mem[1], q_mem[1]) * (1 + HEADROOM)
    f["krr_mem_frac"] = np.where(w_mem[0] > 0, w_mem[2], q_mem[2]) * (1 + HEADROOM)
    return f


def queue_features(
    frame: pd.DataFrame,
    *,
    demand: str = "demand",
    arrivals: str | None = None,
    pending: str | None = None,
    horizon: int = 24,
    serving: bool = False,
) -> pd.DataFrame:
    """Hourly rows per series with lag features, the "max of last 24 h" baseline and next-24 h peak.

    ``frame`` holds ``series_id``, ``timestamp`` (hourly, gap-free per series) and the named columns.
    The target ``y_ratio`` is the next ``horizon`` hours' peak over ``scale`` (last week's peak + 1);
    rows whose future or week of past is incomplete are dropped. ``serving=True`` keeps rows whose future
    is not known yet (their target is NaN): the newest hour is the one a served model predicts from.
    """
    parts: list[pd.DataFrame] = []
    for sid, g in frame.sort_values(["series_id", "timestamp"]).groupby("series_id", sort=True):
        d = g[demand].astype(float).reset_index(drop=True)
        out = pd.DataFrame({"series_id": sid, "timestamp": g["timestamp"].to_numpy()})
        out["lag0"] = d
        out["max24"] = d.rolling(24, min_periods=24).max()
        out["mean24"] = d.rolling(24, min_periods=24).mean()
        out["std24"] = d.rolling(24, min_periods=24).std()
        out["max168"] = d.rolling(168, min_periods=168).max()
        out["mean168"] = d.rolling(168, min_periods=168).mean()
        arr = g[arrivals].astype(float).reset_index(drop=True) if arrivals else pd.Series(np.nan, index=d.index)
        out["arrivals24"] = arr.rolling(24, min_periods=1).sum()
        out["pending0"] = g[pending].astype(float).to_numpy() if pending else np.nan
        # The peak of hours t+1 … t+horizon: a reversed rolling max shifted by one.
        out["target"] = d[::-1].rolling(horizon, min_periods=horizon).max()[::-1].shift(-1)
        parts.append(out)
    needed = ["max168"] if serving else ["max168", "target"]
    f = pd.concat(parts, ignore_index=True).dropna(subset=needed).reset_index(drop=True)
    scale = f["max168"] + 1.0
    f["scale"] = scale
    f["log_scale"] = np.log1p(f["max168"])
    for column in ("lag0", "max24", "mean24", "std24", "max168", "mean168", "arrivals24", "pending0"):
        f[column] = f[column] / scale
    stamps = pd.to_datetime(f["timestamp"])
    f["hour"] = stamps.dt.hour
    f["dow"] = stamps.dt.day_of_week
    f["y_ratio"] = f["target"] / scale
    f["baseline_max24"] = f["max24"] * scale
    return f


def latest_queue_features(demand: pd.DataFrame, pending: pd.DataFrame | None = None) -> pd.DataFrame:
    """``queue_features(..., serving=True)`` of the newest hour only, for every queue at once.

    ``demand`` (and ``pending``) are wide: a gap-free hourly index, one column per queue. Serving needs one
    row per queue, and the per-series rolling windows of ``queue_features`` cost seconds for a thousand
    queues; the same numbers come from the last 168 rows as column reductions (pinned equal in the tests).
    A queue with a missing value in its last week gets NaN features (the caller leaves it unpredicted).
    """
    week = demand.iloc[-168:].to_numpy(np.float64)
    day = week[-24:]
    complete = week.shape[0] == 168
    with np.errstate(all="ignore"):
        f = pd.DataFrame(index=pd.Index(demand.columns.astype(str), name="series_id"))
        f["lag0"] = week[-1]
        f["max24"] = day.max(axis=0) if day.shape[0] == 24 else np.nan
        f["mean24"] = day.mean(axis=0) if day.shape[0] == 24 else np.nan
        f["std24"] = day.std(axis=0, ddof=1) if day.shape[0] == 24 else np.nan
        f["max168"] = week.max(axis=0) if complete else np.nan
        f["mean168"] = week.mean(axis=0) if complete else np.nan
    f.loc[~np.isfinite(day).all(axis=0), ["max24", "mean24", "std24"]] = np.nan
    f.loc[~np.isfinite(week).all(axis=0), ["max168", "mean168"]] = np.nan
    f["arrivals24"] = np.nan
    last = pending.reindex(index=demand.index, columns=demand.columns).iloc[-1] if pending is not None else None
    f["pending0"] = last.to_numpy(np.float64) if last is not None else np.nan
    scale = f["max168"] + 1.0
    f["scale"] = scale
    f["log_scale"] = np.log1p(f["max168"])
    for column in ("lag0", "max24", "mean24", "std24", "max168", "mean168", "arrivals24", "pending0"):
        f[column] = f[column] / scale
    stamp = pd.Timestamp(demand.index[-1])
    f["timestamp"] = stamp
    f["hour"] = stamp.hour
    f["dow"] = stamp.day_of_week
    return f.reset_index()


def feature_matrix(features: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """The numeric matrix of ``columns`` (float64, NaN kept: the regressor routes missing history)."""
    return features[list(columns)].to_numpy(np.float64)
