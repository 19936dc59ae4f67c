"""Small synthetic histories with the warts of real ones (gaps, a drain, a level shift, a flat queue)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest


def synthetic_history(hours: int = 504, seed: int = 0, end_offset_h: int = 0) -> pd.DataFrame:
    """Two busy series plus a constant-zero one; ``busy-b`` ends ``end_offset_h`` hours earlier."""
    rng = np.random.default_rng(seed)
    start = pd.Timestamp("2026-01-05 00:00", tz="UTC")
    t = np.arange(hours)
    daily = 10 * np.sin(2 * np.pi * t / 24)
    a = 60 + daily + 0.02 * t + rng.normal(0, 3, hours)
    a[300:310] = 0.0  # a maintenance drain
    b = 20 + 0.5 * daily + rng.normal(0, 2, hours)
    b[hours // 2 :] += 15  # capacity added: a level shift
    frames = [
        pd.DataFrame({"series_id": "busy-a", "timestamp": start + pd.to_timedelta(t, "h"), "value": a}),
        pd.DataFrame({"series_id": "busy-b", "timestamp": start + pd.to_timedelta(t, "h"), "value": b}).iloc[
            : hours - end_offset_h
        ],
        pd.DataFrame({"series_id": "flat", "timestamp": start + pd.to_timedelta(t, "h"), "value": 0.0}),
    ]
    frame = pd.concat(frames, ignore_index=True)
    gap = (frame["series_id"] == "busy-a") & frame["timestamp"].between(
        start + pd.Timedelta(hours=100), start + pd.Timedelta(hours=104)
    )
    frame["timestamp"] = frame["timestamp"].astype("datetime64[ns, UTC]")
    return frame[~gap].reset_index(drop=True)


@pytest.fixture(scope="session")
def make_history() -> Callable[..., pd.DataFrame]:
    return synthetic_history


@pytest.fixture(scope="session")
def history() -> pd.DataFrame:
    return synthetic_history(end_offset_h=5)
