"""How much better than the simple rules can a week-ahead forecast be? An upper bound on the simulated traces.

Why: on the simulated traces, whether the models or the data limit a forecast is measurable, because the
simulator's hidden state is known: at each origin the *oracle* forecasts
``level × daily × weekend × (1 + phi^k · noise)`` capped at capacity, from the true level, daily and weekend
factors, AR(1) noise and capacity at the origin (``bench.forecast_traces.simulated_components``). It cannot
know the future's shifts, drains or noise shocks, so no forecaster can expect to do much better; the gap
between it and the best simple rule is the room a learned model has.

Beside it, on every trace (the real ones have no oracle): seasonal mean 24 and seasonal median 24 (the
registered baselines) and window mean 168, and ``level_profile``: a rule not registered as a model, the
median profile of each hour over the last 28 days (relative to a 24-hour rolling median) scaled by the
median de-seasonalised level of the last 7 days, to show how far a robust hand-written rule gets. Scored
origins are ``python -m bench.forecast``'s (``--outer`` origins a day apart, 168 hours ahead).

Usage, from the repository root:
    python -m bench.experiments.forecast_oracle [--traces philly,alibaba,sim,sim2,sim3] [--outer 8]
        [--data ../shared/data]

Output: per trace, each rule's MAE in GPUs pooled over points (the benchmark's headline measure) and its
ratio to seasonal mean 24; below 1 is better than that baseline.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bench.forecast_traces import LATER_SEEDS, load_traces, simulated_components
from models.forecast import forecasters

REPO = Path(__file__).resolve().parents[2]

H, STEP, DAY = 168, 24, 24
SEEDS = {"sim": 7, **LATER_SEEDS}
RULES = ("seasonal_mean_24", "seasonal_median_24", "window_mean_168")


def level_profile(
    history: np.ndarray, first_hour: int, profile_days: int = 28, level_days: int = 7
) -> np.ndarray | None:
    """Median hour-of-day profile (relative to a rolling daily median) × the median de-seasonalised level of
    the last ``level_days``; None when the history is shorter than ``profile_days``."""
    if history.size < profile_days * DAY:
        return None
    h = history[-profile_days * DAY :]
    padded = np.concatenate([np.full(DAY // 2, np.nan), h, np.full(DAY - DAY // 2 - 1, np.nan)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows at the edges
        rolling = np.nanmedian(np.lib.stride_tricks.sliding_window_view(padded, DAY), axis=1)
        ratio = np.where(rolling > 0, h / np.where(rolling > 0, rolling, 1), np.nan)
        hour = (first_hour - h.size + np.arange(h.size)) % DAY
        profile = np.array(
            [np.nanmedian(ratio[hour == k]) if np.isfinite(ratio[hour == k]).any() else 1.0 for k in range(DAY)]
        )
    profile = np.where(np.isfinite(profile) & (profile > 0), profile, 1.0)
    recent = h[-level_days * DAY :] / profile[hour[-level_days * DAY :]]
    return float(np.median(recent)) * profile[(first_hour + np.arange(H)) % DAY]


def oracle(queue: dict[str, np.ndarray | float], cut: int) -> np.ndarray:
    """The conditional forecast from the hidden state at the origin (future shifts, drains, shocks unknown)."""
    k = np.arange(1, H + 1)
    future = cut + k - 1
    last = cut - 1
    level, daily, weekend = (np.asarray(queue[name]) for name in ("level", "daily", "weekend"))
    noise, capacity, phi = np.asarray(queue["noise"]), np.asarray(queue["capacity"]), float(queue["phi"])  # type: ignore[arg-type]
    mean = level[last] * daily[future] * weekend[future] * (1 + phi**k * noise[last])
    return np.asarray(np.minimum(mean, capacity[last]))


def score_trace(name: str, frame: pd.DataFrame, outer: int) -> dict[str, float]:
    """Pooled MAE of every rule (and the oracle on a simulated trace) over the trace's scored origins."""
    errors: dict[str, list[np.ndarray]] = {}
    components = simulated_components(seed=SEEDS[name]) if name in SEEDS else None
    for sid, g in frame.sort_values("timestamp").groupby("series_id", sort=True):
        values = g["value"].to_numpy(float)
        for o in range(outer):
            cut = values.size - H - o * STEP
            if cut < 8 * DAY:
                continue
            actual = values[cut : cut + H]
            history = g.iloc[:cut]
            for rule in RULES:
                forecast = forecasters.create(rule).fit(history).predict(H)["mean"].to_numpy(float)
                errors.setdefault(rule, []).append(np.abs(actual - forecast))
            first_hour = int(pd.Timestamp(g["timestamp"].iloc[cut]).hour)
            robust = level_profile(values[:cut], first_hour)
            if robust is not None:
                errors.setdefault("level_profile", []).append(np.abs(actual - robust))
            if components is not None:
                queue = components[int(str(sid)[-2:])]
                assert np.allclose(np.asarray(queue["value"])[cut : cut + H], actual), f"{sid}: not the simulator's"
                errors.setdefault("oracle", []).append(np.abs(actual - oracle(queue, cut)))
    n = max(len(v) for v in errors.values())
    return {rule: float(np.nanmean(v)) for rule, v in errors.items() if len(v) == n}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="philly,alibaba,sim,sim2,sim3")
    parser.add_argument("--outer", type=int, default=8)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    args = parser.parse_args(argv)
    traces = load_traces(args.data, args.traces.split(","))
    rows = {name: score_trace(name, frame, args.outer) for name, frame in traces.items()}
    table = pd.DataFrame(rows).T
    ratio = table.div(table["seasonal_mean_24"], axis=0).add_suffix(" ÷ sm24")
    print("MAE (GPUs) over the scored origins, and each ÷ seasonal mean 24 (— : not computable on that trace)")
    print(pd.concat([table, ratio], axis=1).to_string(float_format=lambda v: f"{v:.3f}", na_rep="—"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
