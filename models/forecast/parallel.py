"""Work ``auto`` hands to other cores while it trains its backtest network, with the serial fit's results.

Why: on a fleet, ``auto``'s time is two trainings of the global LSTM, each on one thread (``lstm``'s
``_threads``: two OpenMP threads on a busy 2-core machine were 12× slower than one), plus per-series work
that grows with the fleet (the baselines' backtests, the per-series choice). Only one piece is on the
critical path: the network the backtest forecasts with must be trained before the backtest can use it.
Everything else does not wait for it, so it runs in worker processes meanwhile: the served network's own
training (it needs nothing from the backtest), the backtest of the fast members, and then half of the
per-series plans. Each piece is the serial code on a part of the work (same seeds, one thread), put back
in the serial order, so the forecast is the serial one (a test compares them).

Workers are fresh interpreters (``Workers``: forking a process that loaded torch is not safe) running one
math thread each (as ``pipelines.fanout``'s do). Starting one costs a few seconds of imports, so they are used
only for histories of at least ``MIN_POINTS`` steps in all. ``PREDICTOR_FORECAST_WORKERS`` caps the
processes (``1``: everything in this process); by default it is the cores this process may run on (one
inside a fan-out's worker or a Ray task, ``available_workers``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from models.forecast.backtest import BacktestResult, run_backtest
from models.forecast.base import BaseForecaster
from models.forecast.prep import ForecastInputError, RegularSeries
from models.frames import ID

__all__ = [
    "MIN_POINTS",
    "WORKERS_ENV",
    "Workers",
    "available_workers",
    "backtest_part",
    "by_series",
    "fit_model",
    "merge_backtests",
    "one_thread_each",
    "spare_workers",
]

WORKERS_ENV = "PREDICTOR_FORECAST_WORKERS"
MIN_POINTS = 20_000  # history steps in all below which a worker's start-up (~3-5 s of imports) outweighs its work

R = TypeVar("R")


def available_workers() -> int:
    """Processes a fit may use: ``PREDICTOR_FORECAST_WORKERS`` if set, else the cores this process may run on.

    A process told to use one math thread (``OMP_NUM_THREADS=1``: how Ray tells a one-CPU task, and what
    ``pipelines.fanout``'s workers and ours set) already is one of several: it starts no workers of its own.
    """
    raw = os.environ.get(WORKERS_ENV, "").strip()
    if raw:
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value < 1:
            raise ForecastInputError(f"{WORKERS_ENV} must be a positive integer, got {raw!r}")
        return value
    if os.environ.get("OMP_NUM_THREADS", "").strip() == "1":
        return 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def spare_workers(series: Sequence[RegularSeries]) -> int:
    """Worker processes worth starting for a fit on ``series``: the other cores, when the history is big."""
    allowed = available_workers()  # read first: a bad setting is an error whatever the history's size
    return allowed - 1 if sum(len(s) for s in series) >= MIN_POINTS else 0


def one_thread_each() -> None:
    """Runs first in each worker process: one math thread, so two workers on two cores do not run four.

    Otherwise every worker starts a BLAS/OpenMP/torch pool as wide as the machine (measured by
    ``bench/fleet.py``: N workers on N cores lost to the serial run).
    """
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = "1"  # for libraries loaded from now on
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)  # and those a spawned worker's __main__ already loaded
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


class Workers:
    """``n`` one-thread worker processes for the length of a fit; ``close`` ends them, done or not.

    loky's pool (joblib's, which scikit-learn brings): its workers start a fresh interpreter (fork + exec,
    so a parent that loaded torch is safe) and, unlike ``multiprocessing``'s spawn, do not re-run the
    caller's script, so a script without an ``if __name__ == "__main__":`` guard still works; a worker that
    dies (killed for memory) fails the fit with an error instead of leaving it waiting; and running work
    can be ended (a fit the backtest turned out not to need).
    """

    def __init__(self, n: int) -> None:
        from joblib.externals.loky import ProcessPoolExecutor

        self.n = n
        self._pool = ProcessPoolExecutor(n, initializer=one_thread_each)

    def submit(self, fn: Callable[..., R], *args: Any) -> Future[R]:
        """``fn(*args)`` in a worker; ``.result()`` returns its result or raises its exception."""
        future: Future[R] = self._pool.submit(fn, *args)
        return future

    def close(self) -> None:
        self._pool.shutdown(wait=True, kill_workers=True)

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def fit_model(model: BaseForecaster, frame: pd.DataFrame) -> BaseForecaster:
    """``model.fit(frame)``, as a top-level function a worker can be handed."""
    return model.fit(frame)


def backtest_part(frame: pd.DataFrame, models: Mapping[str, BaseForecaster], options: Mapping[str, Any]) -> Any:
    """``run_backtest`` of some of the models; its ``ValueError`` (nothing forecast) comes back as a message."""
    try:
        return run_backtest(frame, models, **options)
    except ValueError as exc:
        return str(exc)


def merge_backtests(parts: Sequence[BacktestResult | str], order: Sequence[str]) -> BacktestResult:
    """One backtest from runs over disjoint sets of models, records in the order one run over ``order`` gives.

    ``run_backtest`` writes window by window, the models in order within a window; a part that forecast
    nothing (its message) only adds to ``skipped``. Raises ``ValueError`` when no part forecast anything,
    as one run would.
    """
    done = [p for p in parts if isinstance(p, BacktestResult)]
    failed = [p for p in parts if isinstance(p, str)]
    if not done:
        raise ValueError(failed[0] if failed else "backtest produced no forecasts")
    rank = {name: i for i, name in enumerate(order)}
    records = pd.concat([p.records for p in done], ignore_index=True)
    key = records["window"].to_numpy(np.int64) * len(rank) + records["model"].map(rank).to_numpy(np.int64)
    records = records.iloc[np.argsort(key, kind="stable")].reset_index(drop=True)
    skipped: list[str] = []
    for message in [m for p in done for m in p.skipped] + failed:
        if message not in skipped:  # window-level notes appear in every part
            skipped.append(message)
    first = done[0]
    return BacktestResult(
        records=records,
        scales={k: v for p in done for k, v in p.scales.items()},
        levels=first.levels,
        horizon=first.horizon,
        seconds={k: v for p in done for k, v in p.seconds.items()},
        skipped=skipped,
    )


def by_series(
    fn: Callable[..., dict[str, R]], records: pd.DataFrame, workers: Workers | None, *args: Any
) -> dict[str, R]:
    """``fn(records, *args)`` for a per-series ``fn``, its series split between this process and ``workers``.

    ``fn`` must treat each series on its own and return a dict keyed by series id in sorted order (as
    ``groupby`` gives); the parts are contiguous runs of sorted ids, so the merged dict is ordered the same.
    """
    n = 1 + (workers.n if workers is not None else 0)
    ids = np.sort(records[ID].astype(str).unique())
    if n == 1 or ids.size < 2 * n or workers is None:
        return fn(records, *args)
    bounds = np.linspace(0, ids.size, n + 1).astype(int)
    part_of = pd.Series(np.searchsorted(bounds, np.arange(ids.size), side="right") - 1, index=ids)
    which = part_of.reindex(records[ID].astype(str).to_numpy()).to_numpy()
    pending = [workers.submit(fn, records[which == i], *args) for i in range(1, n)]
    out = fn(records[which == 0], *args)
    for job in pending:
        out.update(job.result())
    return out
