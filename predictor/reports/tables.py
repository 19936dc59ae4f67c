"""The input tables ``build_report`` accepts: their required columns, checked, and keyed by queue and resource.

Every table arrives as a plain frame from files, Prometheus or a test fixture; this is the one place that
checks the columns each needs (one ``InputError`` line naming the first missing column, so a bad file is
diagnosed without a traceback) and gives every row ``queue`` and ``resource`` keys and UTC timestamps.
It is separate from ``predictor.reports.model`` because it knows nothing of what a report shows: the model's
definitions start from tables already in this shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import pandas as pd

from models.frames import ID, TIME, VALUE
from predictor.errors import InputError

__all__ = ["DEFAULT_RESOURCE", "InputTables", "need", "validated_tables"]

DEFAULT_RESOURCE = "nvidia.com/gpu"


def need(frame: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{what}: missing column {missing[0]!r} (columns: {', '.join(map(str, frame.columns))})")


def _keyed(frame: pd.DataFrame, what: str, id_col: str = ID) -> pd.DataFrame:
    """A copy with ``queue`` and ``resource`` columns (resource defaults to the GPU resource)."""
    need(frame, (id_col,), what)
    out = frame.copy()
    out["queue"] = out[id_col].astype(str)
    out["resource"] = out["resource"].astype(str) if "resource" in out.columns else DEFAULT_RESOURCE
    return out


def _history(frame: pd.DataFrame, what: str) -> pd.DataFrame:
    need(frame, (ID, TIME, VALUE), what)
    out = _keyed(frame, what)
    out[TIME] = pd.to_datetime(out[TIME], utc=True)
    out[VALUE] = pd.to_numeric(out[VALUE], errors="coerce").astype("float64")
    return out[["queue", "resource", TIME, VALUE]]


class InputTables(NamedTuple):
    """The validated input tables, keyed by ``queue`` and ``resource``, timestamps as UTC."""

    quotas: pd.DataFrame
    recommendations: Mapping[tuple[str, str], Mapping[Any, Any]]
    allocated: pd.DataFrame
    used: pd.DataFrame
    demand: pd.DataFrame
    forecast: pd.DataFrame


def validated_tables(
    quotas: pd.DataFrame,
    allocated: pd.DataFrame,
    used: pd.DataFrame,
    demand: pd.DataFrame,
    forecast: pd.DataFrame,
    recommendations: pd.DataFrame,
) -> InputTables:
    """Check the columns every table needs and key them by queue and resource; one error per bad input."""
    need(quotas, ("queue", "guarantee", "deserved", "capability"), "quota table")
    need(recommendations, ("queue", "guarantee", "deserved", "capability", "reason"), "recommendations")
    need(forecast, (ID, TIME, "mean"), "forecast frame")
    q = _keyed(quotas, "quota table", "queue")
    rec = {
        (str(r["queue"]), str(r["resource"])): r
        for r in _keyed(recommendations, "recommendations", "queue").to_dict("records")
    }
    alloc, use, dem = (
        _history(allocated, "allocated history"),
        _history(used, "used history"),
        _history(demand, "demand history"),
    )
    if alloc.empty and use.empty:
        raise InputError("no allocation or usage history to report on")
    fc = _keyed(forecast, "forecast frame")
    fc[TIME] = pd.to_datetime(fc[TIME], utc=True)
    return InputTables(quotas=q, recommendations=rec, allocated=alloc, used=use, demand=dem, forecast=fc)
