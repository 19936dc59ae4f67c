"""Where history comes from: Prometheus, long files, NVML, or the simulator's output.

Every source answers ``query_range(query, start, end, step)`` with the one long frame shape
(``series_id, timestamp, value`` + label columns), so the pipelines and the planner do not care which.
What they ask is named once in ``predictor.sources.queries``, the PromQL catalogue.

Names are imported on first use (PEP 562): ``predictor collect`` reads ``predictor.sources.nvml`` on
GPU nodes and must not load pandas and the Prometheus client to do it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import pandas as pd

    from predictor.sources.files import FileSource, read_history, write_frame
    from predictor.sources.parquet_dir import read_metrics
    from predictor.sources.prometheus import PrometheusSource
    from predictor.sources.promql import Matcher, Selector, escape_label_value, series_id

_LAZY = {
    "FileSource": "predictor.sources.files",
    "read_history": "predictor.sources.files",
    "write_frame": "predictor.sources.files",
    "read_metrics": "predictor.sources.parquet_dir",
    "PrometheusSource": "predictor.sources.prometheus",
    "Matcher": "predictor.sources.promql",
    "Selector": "predictor.sources.promql",
    "escape_label_value": "predictor.sources.promql",
    "series_id": "predictor.sources.promql",
}

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
