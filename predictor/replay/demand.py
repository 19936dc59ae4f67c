"""What a replayed planner may know about demand: the zero-wait demand of jobs and the observed history
(the forecasters that read them are in ``forecasters``).

Zero-wait demand is the GPUs jobs would hold if each started at submit (``[submit, submit + duration)``),
the same definition as the shared Philly ``demand_hourly.csv``; it seeds the history before the replay
and, in the future, is the oracle's forecast.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from models.frames import ID, TIME, VALUE
from predictor.sim.series import epoch_s

__all__ = ["History", "zero_wait_demand"]


def _held_integral(submit_s: np.ndarray, end_s: np.ndarray, gpus: np.ndarray, at: np.ndarray) -> np.ndarray:
    """GPU-seconds held by jobs up to each time in ``at``: Σ g·(min(t, e) − s)⁺, from sorted prefix sums."""
    out = np.zeros(len(at))
    for times, sign in ((submit_s, 1.0), (end_s, -1.0)):
        order = np.argsort(times)
        t, g = times[order].astype(float), gpus[order].astype(float)
        cum_g, cum_gt = np.concatenate([[0.0], np.cumsum(g)]), np.concatenate([[0.0], np.cumsum(g * t)])
        k = np.searchsorted(t, at, side="right")
        out += sign * (at * cum_g[k] - cum_gt[k])
    return out


def zero_wait_demand(jobs: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
    """Mean GPUs held per queue and hour in ``[start, end)`` if every job started at submit (long frame)."""
    hours = pd.date_range(start, end, freq="h", inclusive="left")
    edges = np.append(hours.as_unit("s").asi8, int(end.timestamp())).astype(float)
    rows = []
    for queue, g in jobs.groupby("queue", sort=True):
        s = epoch_s(g["submit"])
        e = s + g["duration_s"].to_numpy()
        held = _held_integral(s.astype(float), e, g["num_gpus"].to_numpy(), edges)
        rows.append(pd.DataFrame({ID: str(queue), TIME: hours, VALUE: np.diff(held) / 3600.0}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=[ID, TIME, VALUE])


class History:
    """Seeded with zero-wait demand before the replay, then the observed demand (allocated + pending) hourly:
    what the loop's Prometheus would hold."""

    def __init__(self, seed: pd.DataFrame) -> None:
        self.frame = seed

    def observe(self, t: pd.Timestamp, allocated: dict[str, int], pending: dict[str, int]) -> None:
        row = pd.DataFrame({ID: list(allocated), TIME: t, VALUE: [float(allocated[q] + pending[q]) for q in allocated]})
        self.frame = pd.concat([self.frame, row], ignore_index=True)

    def until(self, now: pd.Timestamp) -> pd.DataFrame:
        return self.frame[self.frame[TIME] <= now]
