"""The report's input tables and what is measured over the window: the first half of ``build_report``.

``predictor.reports.model`` defines every number a report shows; this module holds the steps that do not
depend on the report's dataclasses: checking and keying the input tables by ``queue`` and ``resource``,
slicing a queue's samples out of the window, and the window statistics (mean and p95, sample coverage,
idle GPU-hours, the forecast over the next window). Definitions are in ``model``'s docstring.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from models.frames import ID, TIME, VALUE
from predictor.errors import InputError

__all__ = [
    "DEFAULT_RESOURCE",
    "InputTables",
    "forecast_window",
    "history_frame",
    "idle_gpu_hours",
    "keyed",
    "mean_and_p95",
    "newest_sample",
    "require_columns",
    "sample_coverage",
    "sample_step",
    "validated_tables",
    "window_slice",
]

DEFAULT_RESOURCE = "nvidia.com/gpu"


def require_columns(frame: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    """Raise one ``InputError`` naming the first missing column of ``what`` and the columns it has."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{what}: missing column {missing[0]!r} (columns: {', '.join(map(str, frame.columns))})")


def keyed(frame: pd.DataFrame, what: str, id_col: str = ID) -> pd.DataFrame:
    """A copy with ``queue`` and ``resource`` columns (resource defaults to the GPU resource)."""
    require_columns(frame, (id_col,), what)
    out = frame.copy()
    out["queue"] = out[id_col].astype(str)
    out["resource"] = out["resource"].astype(str) if "resource" in out.columns else DEFAULT_RESOURCE
    return out


def history_frame(frame: pd.DataFrame, what: str) -> pd.DataFrame:
    """A history frame as ``queue, resource, timestamp, value`` (UTC times, float values, NaN if unparsable)."""
    require_columns(frame, (ID, TIME, VALUE), what)
    out = keyed(frame, what)
    out[TIME] = pd.to_datetime(out[TIME], utc=True)
    out[VALUE] = pd.to_numeric(out[VALUE], errors="coerce").astype("float64")
    return out[["queue", "resource", TIME, VALUE]]


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


class InputTables(NamedTuple):
    """The validated input tables, keyed by ``queue`` and ``resource``, timestamps as UTC."""

    quotas: pd.DataFrame
    recommendations: Mapping[tuple[str, str], Mapping[Any, Any]]
    allocated: pd.DataFrame
    used: pd.DataFrame
    demand: pd.DataFrame
    forecast: pd.DataFrame


def validated_tables(quotas: pd.DataFrame, allocated: pd.DataFrame, used: pd.DataFrame, demand: pd.DataFrame,
                     forecast: pd.DataFrame, recommendations: pd.DataFrame) -> InputTables:
    """Check the columns every table needs and key them by queue and resource; one error per bad input."""
    require_columns(quotas, ("queue", "guarantee", "deserved", "capability"), "quota table")
    require_columns(recommendations, ("queue", "guarantee", "deserved", "capability", "reason"), "recommendations")
    require_columns(forecast, (ID, TIME, "mean"), "forecast frame")
    q = keyed(quotas, "quota table", "queue")
    rec = {(str(r["queue"]), str(r["resource"])): r
           for r in keyed(recommendations, "recommendations", "queue").to_dict("records")}
    alloc, use, dem = history_frame(allocated, "allocated history"), history_frame(used, "used history"), \
        history_frame(demand, "demand history")
    if alloc.empty and use.empty:
        raise InputError("no allocation or usage history to report on")
    fc = keyed(forecast, "forecast frame")
    fc[TIME] = pd.to_datetime(fc[TIME], utc=True)
    return InputTables(quotas=q, recommendations=rec, allocated=alloc, used=use, demand=dem, forecast=fc)


def newest_sample(alloc: pd.DataFrame, use: pd.DataFrame) -> pd.Timestamp:
    """``as_of``: the newest allocation or usage sample (the window ends there)."""
    return max(alloc[TIME].max() if not alloc.empty else pd.Timestamp.min.tz_localize("UTC"),
               use[TIME].max() if not use.empty else pd.Timestamp.min.tz_localize("UTC"))


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


def forecast_window(fc: pd.DataFrame, key: tuple[str, str], as_of: pd.Timestamp, window: pd.Timedelta
                    ) -> tuple[pd.DataFrame, float | None, float | None]:
    """The queue's forecast over the next window, its p50 (mean of ``mean``) and p90 (largest ``hi-80``)."""
    f = fc[(fc["queue"] == key[0]) & (fc["resource"] == key[1]) & (fc[TIME] > as_of)
           & (fc[TIME] <= as_of + window)]
    p50 = float(f["mean"].mean()) if len(f) else None
    p90 = float(f["hi-80"].max()) if len(f) and "hi-80" in f.columns else None
    return f, p50, p90
