"""Flags that several commands take, declared once: same name, type and words wherever they appear.

A command takes one of these as a parameter type, e.g. ``history: HistoryOption = None``. Where a flag
means something else in one command (``report --history`` names the simulator's output directory),
that meaning is a separate alias here too, so ``--history`` is never declared in a command module.
Light on purpose (typer and pathlib only): every command module imports it for its ``--help``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = [
    "HistoryDirOption",
    "HistoryFileOption",
    "HistoryOption",
    "HistoryOrMetricsOption",
    "IncidentHistoryOption",
    "PrometheusUrlOption",
    "SettingsFileOption",
    "TrackingUriOption",
]

PrometheusUrlOption = Annotated[
    str | None,
    typer.Option("--prometheus-url", metavar="URL", help="Prometheus base URL to read from (overrides the settings)."),
]

# --history: where a command reads history instead of Prometheus.
HistoryOption = Annotated[
    Path | None,
    typer.Option(
        "--history",
        help="History file (long CSV/Parquet: series_id, timestamp, value) read instead of Prometheus.",
    ),
]
HistoryFileOption = Annotated[
    Path, typer.Option("--history", help="History file (long CSV/Parquet: series_id, timestamp, value).")
]
HistoryOrMetricsOption = Annotated[
    Path | None,
    typer.Option(
        "--history", help="Long CSV/Parquet history file, or the simulator's metrics/ directory, instead of Prometheus."
    ),
]
HistoryDirOption = Annotated[
    Path | None, typer.Option("--history", help="Simulator output directory (predictor simulate --out DIR).")
]
IncidentHistoryOption = Annotated[Path | None, typer.Option("--history", help="History file the incidents refer to.")]

TrackingUriOption = Annotated[
    str | None, typer.Option("--tracking-uri", help="MLflow tracking URI (overrides the settings).")
]
SettingsFileOption = Annotated[
    Path | None,
    typer.Option("--config", help="Settings file, the same as `predictor --config` (replaces it)."),
]
