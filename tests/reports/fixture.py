"""A report fixture small enough to compute by hand: two queues, a one-day window, samples every 6 hours.

Expected numbers (window (2026-01-01T00:00Z, 2026-01-02T00:00Z] → samples at 06, 12, 18, 24 h):

alpha: deserved 10, capability 20, guarantee 2
  allocated 8 12 12 8 → mean 10, p95 12 (sorted 8 8 12 12, rank 2.85)
  used      4 10  8 6 → mean 7,  p95 9.7 (sorted 4 6 8 10: 8 + 0.85·2)
  demand   10 14 12 8 → mean 11, pending 1 → starved (allocated 10 is not above deserved 10)
  idle quota (10−a)+ = 2 0 0 2 → 4 × 6 h = 24 GPU-h; idle allocated (a−u) = 4 2 4 2 → 12 × 6 h = 72 GPU-h
  forecast mean 10 12 14 12 → p50 12; hi-80 13 15 18 15 → p90 18; lo-80 7 9 10 9 → width 6.5/12 = 0.54
  → coverage 1.0, width > 0.5 → confidence medium; recommended 14 → expected utilisation 12/14 = 0.857;
  quota utilisation now (demand / deserved) 11/10 = 1.1
beta: deserved 6, capability 12, guarantee 0
  allocated 8 8 9 7 → mean 8 > 6 → borrowing; p95 8.85 (sorted 7 8 8 9: 8 + 0.85·1)
  used 2 2 3 (the 24 h sample is missing) → mean 2.333, p95 2.9, coverage 3/4 = 0.75
  idle quota 0; idle allocated (8−2)+(8−2)+(9−3) = 18 × 6 h = 108 GPU-h
  forecast mean 3 → p50 3; hi-80 max 5; width 2.25/3 = 0.75, coverage 0.75 < 0.8 → low
  recommended 4 → expected utilisation 0.75; quota utilisation now 8/6 = 1.333
cluster: 24 GPUs; used 7 + 2.333 = 9.333 → 0.389; allocated 18/24 = 0.75; quota now demand 19/16 = 1.1875;
  expected (12 + 3)/(14 + 4) = 0.833; idle quota 24, idle allocated 180.
A sample at the window's open end (2026-01-01T00:00Z, value 100) and a forecast row past the window
(mean 99) must not count.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

T0 = pd.Timestamp("2026-01-01T00:00Z")
HOURS = (0, 6, 12, 18, 24)


def _history(values: dict[str, list[float | None]]) -> pd.DataFrame:
    rows = []
    for queue, series in values.items():
        for hour, value in zip(HOURS, series, strict=True):
            if value is not None:
                rows.append({"series_id": queue, "timestamp": T0 + pd.Timedelta(hours=hour), "value": float(value)})
    return pd.DataFrame(rows)


def _forecast() -> pd.DataFrame:
    rows = []
    spec = {
        "alpha": ([10, 12, 14, 12, 99], [7, 9, 10, 9, 0], [13, 15, 18, 15, 120]),
        "beta": ([3, 3, 3, 3, 99], [2, 2, 2, 2, 0], [4, 4, 5, 4, 120]),
    }
    for queue, (mean, lo, hi) in spec.items():
        for i, hour in enumerate((30, 36, 42, 48, 54)):
            rows.append(
                {
                    "series_id": queue,
                    "timestamp": T0 + pd.Timedelta(hours=hour),
                    "mean": float(mean[i]),
                    "lo-80": float(lo[i]),
                    "hi-80": float(hi[i]),
                    "lo-95": float(lo[i]) - 1,
                    "hi-95": float(hi[i]) + 1,
                }
            )
    return pd.DataFrame(rows)


def fixture_inputs() -> dict[str, Any]:
    """Keyword arguments of ``build_report`` for the hand-computed fixture."""
    return {
        "quotas": pd.DataFrame(
            {"queue": ["beta", "alpha"], "guarantee": [0.0, 2.0], "deserved": [6.0, 10.0], "capability": [12.0, 20.0]}
        ),
        "allocated": _history({"alpha": [100, 8, 12, 12, 8], "beta": [100, 8, 8, 9, 7]}),
        "used": _history({"alpha": [100, 4, 10, 8, 6], "beta": [100, 2, 2, 3, None]}),
        "demand": _history({"alpha": [100, 10, 14, 12, 8], "beta": [100, 8, 8, 9, 7]}),
        "forecast": _forecast(),
        "recommendations": pd.DataFrame(
            {
                "queue": ["alpha", "beta"],
                "guarantee": [2.0, 0.0],
                "deserved": [14.0, 4.0],
                "capability": [20.0, 8.0],
                "reason": ["hi-80 peak 18 +10% headroom, max step 4", "shrink to hi-80 5"],
            }
        ),
        "rightsize": pd.DataFrame(
            {
                "workload": ["w1", "w2", "w3"],
                "queue": ["alpha", "beta", "alpha"],
                "requested_gpus": [8.0, 1.0, 4.0],
                "recommended_gpus": [4.0, 1.0, 1.0],
                "savings_gpu_h": [50.0, 0.0, 120.0],
            }
        ),
        "total_gpus": 24.0,
        "fragmentation": 0.125,
        "window_days": 1,
        "title": "Fixture report",
        "sources": {"history": "hand-computed fixture"},
    }
