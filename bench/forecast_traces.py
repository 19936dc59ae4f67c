"""The traces ``python -m bench.forecast`` scores on: Philly, Alibaba, and simulated queues with shifts and drains.

Why several: a choice tuned on one trace overfits it (an earlier ``auto`` won on Philly and lost on an unseen
trace), so the benchmark holds each trace out in turn. The simulated trace is made here from a seed, not
by ``predictor.sim``: it exists to put many level shifts, drains and capacity changes in front of the
models, which a replay of real job tables produces too rarely to score. ``sim2`` and ``sim3`` are the same
simulator at other seeds, added after every interval design had been chosen on the first three: the check
on configurations nothing was designed or tuned on (docs/design.md).

Philly and Alibaba are ``philly/demand_hourly.csv`` and ``alibaba/demand_hourly.csv`` under the data
directory (``--data``, by default ``../shared/data``, next to the repository): hourly GPU demand per queue
from the public Philly and Alibaba GPU traces.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["LATER_SEEDS", "load_traces", "simulated_components", "simulated_trace"]

LATER_SEEDS = {"sim2": 2028, "sim3": 3031}  # added after the interval designs were chosen


def _frame(raw: pd.DataFrame, value_col: str, prefix: str | None = None) -> pd.DataFrame:
    out = pd.DataFrame(
        {
            "series_id": raw["series_id"].astype(str),
            "timestamp": pd.to_datetime(raw["timestamp"], utc=True),
            "value": pd.to_numeric(raw[value_col], errors="coerce"),
        }
    )
    if prefix:
        out = out[out["series_id"].str.startswith(prefix)]
    return out.dropna(subset=["value"]).reset_index(drop=True)


def simulated_components(n_series: int = 12, weeks: int = 10, seed: int = 7) -> list[dict[str, np.ndarray | float]]:
    """Per queue, the simulator's hidden state hour by hour (level, daily and weekend factors, AR(1) noise and
    its ``phi``, capacity) and the ``value`` it emits: what ``bench.experiments.forecast_oracle`` forecasts from."""
    rng = np.random.default_rng(seed)
    hours = weeks * 168
    t = np.arange(hours)
    out: list[dict[str, np.ndarray | float]] = []
    for _ in range(n_series):
        level = np.full(hours, rng.uniform(10, 400))
        for at in np.flatnonzero(rng.random(hours) < 1 / 400):  # a shift every ~2.4 weeks
            level[at:] *= rng.choice([-1, 1]) * rng.uniform(0.15, 0.5) + 1
        daily = 1 + rng.uniform(0, 0.3) * np.sin(2 * np.pi * (t % 24) / 24 + rng.uniform(0, 6))
        weekend = np.where((t // 24) % 7 >= 5, 1 - rng.uniform(0, 0.2), 1.0)
        noise = np.zeros(hours)
        phi, sd = rng.uniform(0.6, 0.95), rng.uniform(0.03, 0.12)
        for k in range(1, hours):
            noise[k] = phi * noise[k - 1] + rng.normal(0, sd)
        value = level * daily * weekend * (1 + noise)
        capacity = np.full(hours, level.max() * rng.uniform(1.0, 1.4))
        for at in np.flatnonzero(rng.random(hours) < 1 / 800):
            capacity[at:] *= rng.uniform(0.7, 1.3)
        value = np.minimum(value, capacity)
        for at in np.flatnonzero(rng.random(hours) < 1 / 500):  # maintenance drains
            value[at : at + int(rng.integers(4, 48))] *= rng.uniform(0.0, 0.2)
        out.append(
            {"level": level, "daily": daily, "weekend": weekend, "noise": noise, "phi": phi, "capacity": capacity}
            | {"value": value.clip(0)}
        )
    return out


def simulated_trace(n_series: int = 12, weeks: int = 10, seed: int = 7) -> pd.DataFrame:
    """Queues with a daily rhythm, AR(1) noise, level shifts, drains to near zero and capacity caps."""
    start = pd.Timestamp("2026-01-05", tz="UTC")
    frames = []
    for i, queue in enumerate(simulated_components(n_series, weeks, seed)):
        value = np.asarray(queue["value"])
        stamps = start + pd.to_timedelta(np.arange(value.size), "h")
        frames.append(pd.DataFrame({"series_id": f"sim/q{i:02d}", "timestamp": stamps, "value": value}))
    return pd.concat(frames, ignore_index=True)


def load_traces(data_dir: Path, names: list[str]) -> dict[str, pd.DataFrame]:
    """Each requested trace as a history frame (``series_id, timestamp, value``)."""
    out: dict[str, pd.DataFrame] = {}
    for name in names:
        if name == "philly":
            out[name] = _frame(pd.read_csv(data_dir / "philly" / "demand_hourly.csv"), "gpus_demanded")
        elif name == "alibaba":
            out[name] = _frame(pd.read_csv(data_dir / "alibaba" / "demand_hourly.csv"), "gpus_demanded")
        elif name == "sim":
            out[name] = simulated_trace()
        elif name in LATER_SEEDS:  # simulator configurations nothing was designed or tuned on
            later = simulated_trace(seed=LATER_SEEDS[name])
            out[name] = later.assign(series_id=later["series_id"].str.replace("sim/", f"{name}/", regex=False))
        else:
            known = ", ".join(["philly", "alibaba", "sim", *LATER_SEEDS])
            raise SystemExit(f"bench.forecast: unknown trace {name!r} (known: {known})")
    return out
