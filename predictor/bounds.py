"""The bounds every number and time from outside must meet, stated once and checked where it enters.

A value past these bounds is never a real cluster: it is a unit mistake, corruption, or an attack, and
letting it in turns into something worse later — a GPU count of 1e308 becomes a negative goodput after an
int64 cast, a timestamp past 2262 wraps to 1677 in a nanosecond column, a horizon of 10^8 steps allocates
gigabytes before anything fails. Each check raises one ``InputError`` line naming the input.

- GPU counts (a job's ``num_gpus``, a quota, a node's allocatable, a cluster size): at most ``MAX_GPUS``.
- Times: within ``EARLIEST`` … ``LATEST``, the whole days pandas' nanosecond timestamps can hold.
- Forecast horizons: at most ``MAX_HORIZON`` steps (eight weeks of hours), and never ending past ``LATEST``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from predictor.errors import InputError

__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_GPUS",
    "MAX_HORIZON",
    "check_gpu_count",
    "check_gpu_counts",
    "check_horizon",
    "check_time",
    "check_times",
]

# A million GPUs is beyond any cluster, so a larger number is a unit mistake or corruption, and refusing it
# keeps ceil(), headroom and sums finite (1.7e308 × 1.1 is inf).
MAX_GPUS = 1e6
# pandas' nanosecond timestamps run from 1677-09-21 00:12:43 to 2262-04-11 23:47:16; whole days inside.
EARLIEST = pd.Timestamp("1677-09-22", tz="UTC")
LATEST = pd.Timestamp("2262-04-11", tz="UTC")
# Eight weeks of hourly steps: more than any plan looks ahead, and small enough to allocate at once.
MAX_HORIZON = 24 * 7 * 8


def check_gpu_count(value: float, what: str) -> float:
    """``value`` if it is a finite GPU count within 0 … ``MAX_GPUS``; else one line naming ``what``."""
    if not math.isfinite(value) or not 0 <= value <= MAX_GPUS:
        raise InputError(f"{what}: {value!r} is not a GPU count within 0 … {MAX_GPUS:g}")
    return value


def check_gpu_counts(values: pd.Series, what: str, *, first_row: int = 2) -> None:
    """Every value a finite GPU count within 0 … ``MAX_GPUS``; the error names the first bad row."""
    array = values.to_numpy(dtype="float64")
    bad = ~np.isfinite(array) | (array < 0) | (array > MAX_GPUS)
    if bad.any():
        row = int(bad.argmax())
        raise InputError(f"{what} is not a GPU count within 0 … {MAX_GPUS:g} at row {row + first_row} ({array[row]!r})")


def check_time(stamp: pd.Timestamp, what: str) -> pd.Timestamp:
    """``stamp`` if it lies within ``EARLIEST`` … ``LATEST``; else one line naming ``what``."""
    utc = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    if not EARLIEST <= utc <= LATEST:
        raise InputError(f"{what} {stamp.isoformat()} is outside {EARLIEST:%Y-%m-%d} … {LATEST:%Y-%m-%d}")
    return utc


def check_times(stamps: pd.Series | Sequence[pd.Timestamp], what: str, *, first_row: int = 2) -> None:
    """Every (UTC-aware) timestamp within ``EARLIEST`` … ``LATEST``; the error names the first bad row."""
    series = pd.Series(stamps)
    bad = ((series < EARLIEST) | (series > LATEST)).to_numpy()
    if bad.any():
        row = int(bad.argmax())
        raise InputError(
            f"{what} {series.iloc[row].isoformat()} at row {row + first_row} is outside "
            f"{EARLIEST:%Y-%m-%d} … {LATEST:%Y-%m-%d}"
        )


def check_horizon(horizon: int, what: str, *, last: pd.Timestamp | None = None, step: str | None = None) -> int:
    """``horizon`` if it is 1 … ``MAX_HORIZON`` steps and, given the ``last`` time and the ``step``, its
    forecasts end by ``LATEST`` (later ones would wrap to 1677)."""
    if not 1 <= horizon <= MAX_HORIZON:
        raise InputError(f"{what} {horizon} is outside 1 … {MAX_HORIZON} steps")
    if last is not None and step is not None:
        try:
            end = last + horizon * pd.tseries.frequencies.to_offset(step)
        except (OverflowError, ValueError, pd.errors.OutOfBoundsDatetime) as exc:
            raise InputError(f"{what} {horizon} steps of {step} after {last.isoformat()} overflow") from exc
        if end > LATEST:
            raise InputError(f"{what} {horizon} steps of {step} after {last.isoformat()} end past {LATEST:%Y-%m-%d}")
    return horizon
