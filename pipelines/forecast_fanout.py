"""The forecast job's fits and backtests, chunk by chunk, on whichever executor the command chose.

Each chunk of series (``chunk_series``: per cluster when the history has one, then at most ``chunk_size``
series) is one task: backtest a fresh copy of the template on the chunk's history, then fit another copy
on all of it and forecast. The driver concatenates the per-window metrics and forecasts and assembles the
fitted chunks into one model (``ChunkedForecaster``; the template itself when there is a single chunk, so a
history of up to ``chunk_size`` series trains exactly as it did before chunking). Tasks take and return
data only; registering the result in MLflow stays with the caller, once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
from sklearn.base import clone

from models.forecast import BaseForecaster
from models.forecast.chunked import ChunkedForecaster, chunk_series
from models.frames import ID
from pipelines.fanout import Executor, current_executor

__all__ = ["ChunkResult", "ChunkTask", "FannedOut", "fit_and_backtest", "run_chunk"]


# What the forecast pipeline does to one chunk (``pipelines.forecast.evaluate`` and its final fit), passed in
# rather than imported so this module stays below the pipeline that uses it; module-level functions pickle
# by name, so a worker imports them from the installed package.
Backtest = Callable[..., pd.DataFrame]
FitFinal = Callable[[BaseForecaster, pd.DataFrame, int, tuple[int, ...]], tuple[BaseForecaster, pd.DataFrame]]


@dataclass(frozen=True)
class ChunkTask:
    """One chunk's work: what a worker receives (picklable: an unfitted template and a slice of history)."""

    backtest: Backtest
    fit_final: FitFinal
    template: BaseForecaster
    history: pd.DataFrame
    horizon: int
    windows: int
    step: int
    levels: tuple[int, ...]
    name: str
    fit: bool = True


@dataclass(frozen=True)
class ChunkResult:
    per_window: pd.DataFrame
    model: BaseForecaster | None
    forecast: pd.DataFrame | None


@dataclass(frozen=True)
class FannedOut:
    """The whole history's result: per-window metrics, and (when fitted) the model and its forecast."""

    per_window: pd.DataFrame
    model: BaseForecaster | None
    forecast: pd.DataFrame | None
    chunks: int


def run_chunk(task: ChunkTask) -> ChunkResult:
    """Backtest and fit one chunk (runs in a worker: no MLflow, no files)."""
    per_window = task.backtest(
        clone(task.template), task.history, horizon=task.horizon, windows=task.windows, step=task.step, name=task.name
    )
    if not task.fit:
        return ChunkResult(per_window, None, None)
    model, forecast = task.fit_final(clone(task.template), task.history, task.horizon, task.levels)
    return ChunkResult(per_window, model, forecast)


def fit_and_backtest(
    estimator: BaseForecaster,
    history: pd.DataFrame,
    *,
    backtest: Backtest,
    fit_final: FitFinal,
    horizon: int,
    windows: int,
    step: int,
    levels: tuple[int, ...],
    name: str,
    chunk_size: int,
    fit: bool = True,
    executor: Executor | None = None,
) -> FannedOut:
    """Backtest (and fit, unless ``fit`` is false) ``estimator`` chunk by chunk; see the module docstring.

    A ``ChunkedForecaster`` (a champion trained this way) is re-scored with its own template and chunk size.
    """
    template, size = estimator, chunk_size
    if isinstance(estimator, ChunkedForecaster) and estimator.estimator is not None:
        template, size = estimator.estimator, int(estimator.chunk_size)
    chunks = chunk_series(history, size)
    ids = history[ID].astype(str)
    tasks = [
        ChunkTask(
            backtest, fit_final, template, history[ids.isin(chunk)], horizon, windows, step, tuple(levels), name, fit
        )
        for chunk in chunks
    ]
    results = (executor or current_executor()).map(run_chunk, tasks)
    per_window = pd.concat([r.per_window for r in results], ignore_index=True)
    if not fit:
        return FannedOut(per_window, None, None, len(chunks))
    parts = [r.model for r in results if r.model is not None]
    forecast = pd.concat([r.forecast for r in results if r.forecast is not None], ignore_index=True)
    if len(parts) == 1:
        return FannedOut(per_window, parts[0], forecast, 1)
    model = ChunkedForecaster(clone(template), chunk_size=size, freq=template.freq).assemble(parts)
    return FannedOut(per_window, model, forecast, len(chunks))
