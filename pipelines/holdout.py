"""The promotion gate's forecast score: the newest window, which neither the challenger nor the champion saw.

The rolling backtest says how a *configuration* does; promotion asks a narrower question: is the model the
loop would serve after this retrain better than the one it serves now? So the last ``horizon`` steps are
held out, the challenger is fitted on the history before them, the champion is taken as registered (its
stored state updated with that same history, as the loop serves it, never refitted), and both forecasts
are scored on the held-out steps with the same MASE (scaled by each series' one-step naive error before
the window, so queues of any size weigh the same).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from models.frames import ID, TIME, VALUE
from predictor.errors import ModelError

__all__ = ["holdout_mase", "split_last"]


def split_last(history: pd.DataFrame, horizon: int, freq: str = "1h") -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(before, window)``: the history up to ``horizon`` steps before its newest timestamp, and the rest."""
    times = pd.to_datetime(history[TIME], utc=True)
    cutoff = times.max() - int(horizon) * pd.Timedelta(freq)
    before, window = history.loc[times <= cutoff], history.loc[times > cutoff]
    if before.empty or window.empty:
        raise ModelError(f"the history is too short to hold out its last {horizon} steps for the promotion gate")
    return before.reset_index(drop=True), window.reset_index(drop=True)


def holdout_mase(forecast: pd.DataFrame, before: pd.DataFrame, window: pd.DataFrame) -> float:
    """Mean over series of MAE(forecast ``mean`` vs ``window``) / mean |one-step change| of ``before``.

    A series without a scale (constant before the window) or without forecast points counts by its MAE
    when no series has a scale, and is skipped otherwise; no overlap at all is a ``ModelError``.
    """
    actual = window.assign(**{TIME: pd.to_datetime(window[TIME], utc=True)})
    predicted = forecast.assign(**{TIME: pd.to_datetime(forecast[TIME], utc=True)})
    joined = actual.merge(predicted[[ID, TIME, "mean"]], on=[ID, TIME], how="inner")
    if joined.empty:
        raise ModelError("the forecast covers none of the held-out window")
    error = (joined[VALUE].astype(float) - joined["mean"].astype(float)).abs().groupby(joined[ID]).mean()
    ordered = before.sort_values([ID, TIME])
    scale = ordered.groupby(ID)[VALUE].apply(_naive_error)
    mase = (error / scale.reindex(error.index)).replace([np.inf, -np.inf], np.nan)
    return float(mase.mean()) if mase.notna().any() else float(error.mean())


def _naive_error(values: pd.Series) -> float:
    steps = np.abs(np.diff(values.to_numpy(np.float64)))
    steps = steps[np.isfinite(steps)]
    return float(steps.mean()) if steps.size else float("nan")
