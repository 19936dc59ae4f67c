"""The window statistics behind each report row, on frames small enough to check by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from predictor.reports.window import (
    forecast_window,
    idle_gpu_hours,
    mean_and_p95,
    newest_sample,
    sample_coverage,
    window_slice,
)

T0 = pd.Timestamp("2026-03-02T00:00Z")
GPU = "nvidia.com/gpu"
KEY = ("a", GPU)


def _history(values: list[float], step_h: int = 1) -> pd.DataFrame:
    """A keyed history frame of queue ``a``, as ``build_report`` hands it over."""
    times = [T0 + pd.Timedelta(hours=step_h * (i + 1)) for i in range(len(values))]
    return pd.DataFrame({"queue": "a", "resource": GPU, "timestamp": times, "value": values})


def test_window_is_open_at_the_start_and_closed_at_the_end() -> None:
    frame = _history([1.0, 2.0, 3.0, 4.0])
    part = window_slice(frame, KEY, T0 + pd.Timedelta(hours=1), T0 + pd.Timedelta(hours=3))
    assert part["value"].tolist() == [2.0, 3.0]


def test_mean_and_p95_skip_missing_samples() -> None:
    assert mean_and_p95(np.array([1.0, np.nan, 3.0])) == (2.0, pytest.approx(2.9))
    assert mean_and_p95(np.array([np.nan])) == (None, None)


def test_coverage_is_the_smaller_of_allocated_and_used() -> None:
    allocated, used = _history([1.0] * 24), _history([1.0] * 12)
    assert sample_coverage(allocated, used, allocated, pd.Timedelta(days=1)) == 0.5


def test_idle_gpu_hours() -> None:
    allocated, used = _history([2.0, 4.0, 6.0], step_h=2), _history([1.0, 4.0, 7.0], step_h=2)
    # deserved 5: idle quota (3 + 1 + 0) × 2 h; idle allocation (1 + 0 + 0) × 2 h
    assert idle_gpu_hours(allocated, used, 5.0) == (8.0, 2.0)
    assert idle_gpu_hours(allocated.iloc[:0], used, 5.0) == (None, None)


def test_forecast_window_p50_is_the_mean_and_p90_the_largest_hi80() -> None:
    times = [T0 + pd.Timedelta(hours=h) for h in range(4)]
    fc = pd.DataFrame(
        {
            "queue": "a",
            "resource": GPU,
            "timestamp": times,
            "mean": [9.0, 1.0, 2.0, 3.0],
            "hi-80": [99.0, 2.0, 5.0, 4.0],
        }
    )
    part, p50, p90 = forecast_window(fc, KEY, T0, pd.Timedelta(hours=3))
    assert len(part) == 3 and (p50, p90) == (2.0, 5.0)
    assert forecast_window(fc, ("b", GPU), T0, pd.Timedelta(hours=3))[1:] == (None, None)


def test_as_of_is_the_newest_sample_of_either_history() -> None:
    assert newest_sample(_history([1.0]), _history([1.0, 1.0])) == T0 + pd.Timedelta(hours=2)
