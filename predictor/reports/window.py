"""What a report measures over its window, per queue: the statistics behind each row of ``build_report``.

``predictor.reports.model`` defines every number a report shows and builds the rows; the steps here work
on frames already keyed by ``queue`` and ``resource`` and know nothing of the report's dataclasses:
slicing a queue's samples out of the window, mean and p95, sample coverage, idle GPU-hours and the
forecast over the next window. Definitions are in ``model``'s docstring.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from models.frames import TIME, VALUE

__all__ = [
    "forecast_window",
    "idle_gpu_hours",
    "mean_and_p95",
    "newest_sample",
    "sample_coverage",
    "sample_step",
    "window_slice",
]


def sample_step(times: pd.Series) -> pd.Timedelta:
    """The median spacing of ``times`` (one hour when there are fewer than two)."""
    diffs = times.sort_values().diff().dropna()
    return pd.Timedelta(diffs.median()) if len(diffs) else pd.Timedelta(hours=1)


def mean_and_p95(values: np.ndarray) -> tuple[float | None, float | None]:
    """Mean and linear 95th percentile of the finite values; ``None`` for both when there are none."""
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return None, None
    return float(values.mean()), float(np.percentile(values, 95))


def window_slice(frame: pd.DataFrame, key: tuple[str, str], start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
    """The rows of one (queue, resource) in ``(start, end]``, oldest first."""
    mine = frame[(frame["queue"] == key[0]) & (frame["resource"] == key[1])]
    return mine[(mine[TIME] > start) & (mine[TIME] <= end)].sort_values(TIME)


def newest_sample(alloc: pd.DataFrame, use: pd.DataFrame) -> pd.Timestamp:
    """``as_of``: the newest allocation or usage sample (the window ends there)."""
    return max(
        alloc[TIME].max() if not alloc.empty else pd.Timestamp.min.tz_localize("UTC"),
        use[TIME].max() if not use.empty else pd.Timestamp.min.tz_localize("UTC"),
    )


def sample_coverage(a: pd.DataFrame, u: pd.DataFrame, all_allocated: pd.DataFrame, window: pd.Timedelta) -> float:
    """Samples present / expected in the window, the smaller of the allocated and used series."""
    coverages = []
    for part in (a, u):
        step = sample_step(part[TIME]) if len(part) > 1 else sample_step(all_allocated[TIME].drop_duplicates())
        expected = max(1, round(window / step))
        coverages.append(min(1.0, int(np.isfinite(part[VALUE].to_numpy()).sum()) / expected))
    return min(coverages)


def idle_gpu_hours(a: pd.DataFrame, u: pd.DataFrame, deserved: float) -> tuple[float | None, float | None]:
    """Idle quota (deserved but unallocated) and idle allocation (allocated but unused), in GPU-hours."""
    step_h = (sample_step(a[TIME]) if len(a) > 1 else pd.Timedelta(hours=1)) / pd.Timedelta(hours=1)
    idle_quota = float(np.clip(deserved - a[VALUE].to_numpy(), 0, None).sum() * step_h) if len(a) else None
    idle_alloc = None
    if len(a) and len(u):
        joined = a.merge(u, on=TIME, suffixes=("_a", "_u"))
        idle_alloc = float(np.clip(joined[f"{VALUE}_a"] - joined[f"{VALUE}_u"], 0, None).sum() * step_h)
    return idle_quota, idle_alloc


def forecast_window(
    fc: pd.DataFrame, key: tuple[str, str], as_of: pd.Timestamp, window: pd.Timedelta
) -> tuple[pd.DataFrame, float | None, float | None]:
    """The queue's forecast over the next window, its p50 (mean of ``mean``) and p90 (largest ``hi-80``)."""
    f = fc[(fc["queue"] == key[0]) & (fc["resource"] == key[1]) & (fc[TIME] > as_of) & (fc[TIME] <= as_of + window)]
    p50 = float(f["mean"].mean()) if len(f) else None
    p90 = float(f["hi-80"].max()) if len(f) and "hi-80" in f.columns else None
    return f, p50, p90
