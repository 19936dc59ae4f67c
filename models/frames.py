"""The one frame shape that crosses every seam (sources → models → reports).

History: ``series_id`` (str), ``timestamp`` (UTC, tz-aware), ``value`` (float64), plus label columns.
Forecast: ``series_id``, ``timestamp``, ``mean`` and ``lo-<L>`` / ``hi-<L>`` for each interval level L.
Kept in ``models`` (pure pandas) so estimators and the runtime share it without an import cycle.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

__all__ = [
    "HISTORY_COLUMNS",
    "ID",
    "TIME",
    "VALUE",
    "empty_history",
    "forecast_columns",
    "interval_columns",
]

ID = "series_id"
TIME = "timestamp"
VALUE = "value"
HISTORY_COLUMNS = (ID, TIME, VALUE)


def empty_history(label_columns: Iterable[str] = ()) -> pd.DataFrame:
    """A history frame with no rows but the right dtypes (what a query with no data returns)."""
    frame = pd.DataFrame(
        {
            ID: pd.Series(dtype="object"),
            TIME: pd.Series(dtype="datetime64[ns, UTC]"),
            VALUE: pd.Series(dtype="float64"),
        }
    )
    for column in label_columns:
        frame[column] = pd.Series(dtype="object")
    return frame


def interval_columns(levels: Iterable[int]) -> list[str]:
    """``["lo-80", "hi-80", "lo-95", "hi-95"]`` for levels (80, 95)."""
    columns: list[str] = []
    for level in levels:
        columns += [f"lo-{level}", f"hi-{level}"]
    return columns


def forecast_columns(levels: Iterable[int]) -> list[str]:
    """Columns of a forecast frame, in order."""
    return [ID, TIME, "mean", *interval_columns(levels)]
