"""Job tables for replay tests written in hours: ``(submit_h, queue, num_gpus, duration_h)`` rows from ``start``."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from predictor import sim


def hourly_jobs(rows: Iterable[tuple[float, str, int, float]], start: pd.Timestamp) -> pd.DataFrame:
    """The normalised job table of ``rows``: each submitted ``submit_h`` hours after ``start`` (negative: in the
    warm-up week before it) and running ``duration_h`` hours."""
    frame = pd.DataFrame(list(rows), columns=["submit_h", "queue", "num_gpus", "duration_h"])
    frame["submit_time"] = (start + pd.to_timedelta(frame.pop("submit_h"), unit="h")).astype(str)
    frame["duration_s"] = frame.pop("duration_h") * 3600
    return sim.normalise_jobs(frame)
