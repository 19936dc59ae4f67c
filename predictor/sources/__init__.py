"""Where history comes from: Prometheus, long files, NVML, or the simulator's output.

Every source answers ``query_range(query, start, end, step)`` with the one long frame shape
(``series_id, timestamp, value`` + label columns), so the pipelines and the planner do not care which.
What they ask is named once in ``predictor.sources.queries``, the PromQL catalogue.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import pandas as pd

from predictor.sources.files import FileSource, read_history, write_frame
from predictor.sources.parquet_dir import read_metrics
from predictor.sources.prometheus import PrometheusSource
from predictor.sources.promql import Matcher, Selector, escape_label_value, series_id

__all__ = [
    "FileSource",
    "Matcher",
    "MetricSource",
    "PrometheusSource",
    "Selector",
    "escape_label_value",
    "read_history",
    "read_metrics",
    "series_id",
    "write_frame",
]


@runtime_checkable
class MetricSource(Protocol):
    """Anything that answers range queries with a long history frame."""

    def query_range(self, query: str, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta) -> pd.DataFrame: ...
