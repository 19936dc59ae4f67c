"""Quota recommendation reports: one report model rendered as HTML, Markdown, CSV and JSON.

``build_report`` turns plain tables (quotas, allocation/usage/demand history, a forecast frame,
recommendations, right-sizing savings) into a ``Report``; ``write_report`` writes every format from it.
``predictor.reports.inputs`` gathers those tables from the simulator's Parquet output or Prometheus, so
the model itself never touches a live service and is pinned by a hand-computed fixture.
"""

from __future__ import annotations

from predictor.reports.columns import fmt
from predictor.reports.energy import EnergyRow
from predictor.reports.model import DEFAULT_RESOURCE, ChartData, QueueRow, Report, Summary, WorkloadRow, build_report
from predictor.reports.render import (
    render_csv,
    render_json,
    render_markdown,
    render_summary_csv,
    write_report,
    write_text,
)

# The one list of public names: the private modules behind it do not repeat it.
__all__ = [
    "DEFAULT_RESOURCE",
    "ChartData",
    "EnergyRow",
    "QueueRow",
    "Report",
    "Summary",
    "WorkloadRow",
    "build_report",
    "fmt",
    "render_csv",
    "render_json",
    "render_markdown",
    "render_summary_csv",
    "write_report",
    "write_text",
]
