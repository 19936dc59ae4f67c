"""What a replayed planner may know about demand: the zero-wait demand of jobs, the observed history, and
the two forecasters a replay plans from (the loop's, retrained weekly on the past only, and the oracle's).

Zero-wait demand is the GPUs jobs would hold if each started at submit (``[submit, submit + duration)``),
the same definition as the shared Philly ``demand_hourly.csv``. The oracle's forecast is that demand in the
future, exact at every quantile: a plan from it is the best the planner's rules can do (the upper bound).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from models.frames import ID, TIME, VALUE
from predictor.sim.series import epoch_s

__all__ = ["History", "OracleForecaster", "WeeklyAuto", "zero_wait_demand"]

HOUR = pd.Timedelta(hours=1)
QUANTILES = ("mean", "lo-80", "hi-80", "lo-95", "hi-95")


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


class WeeklyAuto:
    """``auto`` retrained weekly on the history so far; its chosen models refitted on the newest history.

    The refit runs every ``refresh_h`` hours with a horizon that much longer, so each hourly cycle sees a
    full planning horizon from a forecast at most ``refresh_h`` − 1 hours old (keeps a replay affordable).
    Candidates are the cheap backtested ones of ``bench/loop.py`` (naive, drift, seasonal naive 24).
    """

    def __init__(self, refresh_h: int = 3) -> None:
        self.weights: dict[str, dict[str, float]] = {}
        self.refresh_h = refresh_h
        self.retrains = 0
        self._cached: tuple[pd.Timestamp, pd.DataFrame] | None = None

    def retrain(self, history: pd.DataFrame) -> None:
        from models.forecast.auto import AutoForecaster

        auto = AutoForecaster(candidates=("naive", "drift", "seasonal_naive_24"), windows=2, step=24, horizon=24)
        auto.fit(history)
        self.weights = {sid: dict(plan.weights) for sid, plan in auto.states_.items()}
        self.retrains += 1
        self._cached = None

    def forecast(self, history: pd.DataFrame, *, now: pd.Timestamp, horizon: int) -> pd.DataFrame:
        del now  # the history ends at now; the forecast starts after it
        newest = history[TIME].max()
        if self._cached is not None and newest - self._cached[0] < pd.Timedelta(hours=self.refresh_h):
            return self._cached[1]
        frame = self._refit(history, horizon + self.refresh_h)
        self._cached = (newest, frame)
        return frame

    def _refit(self, history: pd.DataFrame, horizon: int) -> pd.DataFrame:
        from models.forecast import forecasters

        models = sorted({m for w in self.weights.values() for m in w})
        preds = {m: forecasters.create(m).fit(history).predict(horizon).set_index([ID, TIME]) for m in models}
        parts = []
        for sid, weights in self.weights.items():
            blend: Any = sum(w * preds[m].loc[sid] for m, w in weights.items())
            parts.append(blend.assign(**{ID: sid}).reset_index())
        frame: pd.DataFrame = pd.concat(parts, ignore_index=True)
        return frame


class OracleForecaster:
    """The true future zero-wait demand as a forecast with no spread (every quantile is the truth)."""

    def __init__(self, jobs: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp, horizon_h: int) -> None:
        self.demand = zero_wait_demand(jobs, start, end + pd.Timedelta(hours=horizon_h + 1))
        self.retrains = 0

    def retrain(self, history: pd.DataFrame) -> None:
        del history  # nothing to learn: it knows the future

    def forecast(self, history: pd.DataFrame, *, now: pd.Timestamp, horizon: int) -> pd.DataFrame:
        del history
        window = self.demand[(self.demand[TIME] > now) & (self.demand[TIME] <= now + horizon * HOUR)]
        frame = window[[ID, TIME]].copy()
        for column in QUANTILES:
            frame[column] = window[VALUE].to_numpy()
        return frame.reset_index(drop=True)
