"""A team's own labelled incidents as training rows: which file, and the history around each incident.

The training job looks for ``DEFAULT_INCIDENTS`` (where the retraining CronJob mounts the team's incidents)
when no file is named, so a cluster that records its incidents teaches the model without a flag; a file
that is named but missing is an error, a default that is absent is not. The history is a file when one is
given, else Prometheus is read around each incident: the window and the one before it, as diagnosis reads.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pipelines.rca_data import WINDOW, incident_windows, read_incidents
from predictor.errors import InputError
from predictor.sources import MetricSource
from predictor.sources.files import read_history
from predictor.timeparse import parse_duration

__all__ = ["DEFAULT_INCIDENTS", "IncidentRows", "incident_rows", "resolve_incidents"]

DEFAULT_INCIDENTS = Path("/etc/predictor/incidents/incidents.csv")
STEP = pd.Timedelta(minutes=1)  # the query step when reading Prometheus, as ``predictor diagnose`` uses


def resolve_incidents(explicit: Path | None, default: Path = DEFAULT_INCIDENTS) -> Path | None:
    """The incidents file to learn from: the one named (which must exist), else ``default`` if present.
    Naming ``default`` itself is the same as naming nothing: the CronJob passes the mount path, and an
    optional ConfigMap that was never created leaves it empty."""
    if explicit is not None and explicit != default:
        if not explicit.is_file():
            raise InputError(f"--incidents {explicit}: no such file")
        return explicit
    return default if default.is_file() else None


class IncidentRows:
    """Labelled rows of a team's incidents and how many incidents yielded at least one row."""

    def __init__(self, rows: pd.DataFrame, incidents: int) -> None:
        self.rows, self.incidents = rows, incidents


def incident_rows(
    path: Path,
    *,
    history: Path | None = None,
    source: MetricSource | None = None,
    window: pd.Timedelta = WINDOW,
    step: pd.Timedelta = STEP,
) -> IncidentRows:
    """The labelled rows of the incidents in ``path``, from the ``history`` file or else from ``source``."""
    incidents = read_incidents(path)  # the user's file first: a bad one fails in a second
    if history is not None:
        rows = incident_windows(read_history(history), incidents, window)
        if rows.empty:
            return IncidentRows(rows, 0)
        hit = {(pd.Timestamp(t), str(c)) for t, c in zip(rows["at"], rows["label"], strict=True)}
        return IncidentRows(
            rows,
            sum((pd.Timestamp(t), str(c)) in hit for t, c in zip(incidents["time"], incidents["cause"], strict=True)),
        )
    else:
        if source is None:
            raise InputError(f"{path}: incidents need a history: give --history FILE or configure Prometheus")
        from predictor.diagnose.engine import fetch_window

        parts = []
        for i in range(len(incidents)):
            one = incidents.iloc[[i]]
            text = one["window"].iloc[0] if "window" in one.columns else None
            w = parse_duration(text, name="incident window") if isinstance(text, str) and text else window
            frame = fetch_window(source, pd.Timestamp(one["time"].iloc[0]), w, step)
            parts.append(incident_windows(frame, one, window) if len(frame) else pd.DataFrame())
    found = [p for p in parts if len(p)]
    rows = pd.concat(found, ignore_index=True) if found else pd.DataFrame()
    return IncidentRows(rows, len(found))
