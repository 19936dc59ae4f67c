"""``auto`` trains the network it serves in a worker process while it backtests, and serves the same forecast.

What a user relies on: on a machine with two cores a fleet forecast overlaps its two LSTM trainings, and
the forecast is exactly the one a single process gives; ``PREDICTOR_FORECAST_WORKERS`` caps the processes
and a bad value is one clear error naming it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from models.forecast import ForecastInputError, auto, parallel
from models.forecast.parallel import WORKERS_ENV, Workers
from tests.models.conftest import synthetic_history

H = 12
TINY_LSTM: dict[str, Any] = {"horizon": H, "lookback_days": 2, "hidden_size": 4, "max_epochs": 2}
HISTORY = synthetic_history(hours=360, end_offset_h=5)


def _forecast() -> pd.DataFrame:
    model = auto.AutoForecaster(windows=3, step=24, horizon=H, candidate_params={"lstm": TINY_LSTM})
    return model.fit(HISTORY).predict(H, level=(50, 80, 95))


@pytest.mark.slow
def test_the_work_done_beside_the_backtest_gives_the_serial_forecast(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[int] = []

    class Recorded(Workers):
        def __init__(self, n: int) -> None:
            super().__init__(n)
            started.append(n)

    monkeypatch.setattr(auto, "Workers", Recorded)
    monkeypatch.setattr(parallel, "MIN_POINTS", 0)  # this small history is worth a worker here
    monkeypatch.setenv(WORKERS_ENV, "1")
    serial = _forecast()
    assert not started  # one process allowed: nothing ran in a worker
    monkeypatch.setenv(WORKERS_ENV, "2")
    parallel_forecast = _forecast()
    assert started == [1]  # one worker beside this process
    pd.testing.assert_frame_equal(parallel_forecast, serial)


@pytest.mark.parametrize("value", ["0", "two"])
def test_a_bad_worker_count_is_one_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(WORKERS_ENV, value)  # refused even for a history too small to use a worker
    with pytest.raises(ForecastInputError, match=WORKERS_ENV):
        _forecast()


def test_a_process_told_to_use_one_thread_starts_no_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ray task or a fan-out worker (OMP_NUM_THREADS=1) is already one of several processes."""
    monkeypatch.delenv(WORKERS_ENV, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert parallel.available_workers() == 1
    monkeypatch.setenv(WORKERS_ENV, "2")  # an explicit setting wins
    assert parallel.available_workers() == 2
