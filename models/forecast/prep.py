"""Turn a long history frame into regular per-series arrays, because real series are not regular.

Prometheus and trace exports skip hours (scrape gaps, restarts, drains that drop the series), so every
forecaster works on a gap-free grid: missing hours are *imputed for fitting only* (linear in time) and
remembered in an ``observed`` mask so that residual quantiles and backtest scores never use invented
actuals. The grid is anchored at each series' first timestamp; the forecast grid continues its last one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from models.durations import DurationError, parse_duration
from models.frames import ID, TIME, VALUE

__all__ = [
    "ForecastInputError",
    "RegularSeries",
    "check_levels",
    "parse_freq",
    "regularize",
    "to_frame",
]


class ForecastInputError(ValueError):
    """A history frame or argument a forecaster cannot use (wrong columns, off-grid times, no values)."""


@dataclass(frozen=True)
class RegularSeries:
    """One series on a regular grid: imputed values plus which of them were really observed."""

    series_id: str
    start: pd.Timestamp
    freq: pd.Timedelta
    values: np.ndarray  # float64, no NaN (imputed where not observed)
    observed: np.ndarray  # bool, same length

    def __len__(self) -> int:
        return int(self.values.shape[0])

    @property
    def end(self) -> pd.Timestamp:
        return self.start + (len(self) - 1) * self.freq

    @property
    def n_observed(self) -> int:
        return int(self.observed.sum())

    def index(self) -> pd.DatetimeIndex:
        return pd.date_range(self.start, periods=len(self), freq=self.freq)

    def future_index(self, horizon: int) -> pd.DatetimeIndex:
        return pd.date_range(self.end + self.freq, periods=horizon, freq=self.freq)


def parse_freq(freq: str | pd.Timedelta) -> pd.Timedelta:
    """``"1h"``, ``"5min"``, ``"300"`` (seconds) → ``Timedelta`` (grammar: ``models.durations``); a
    non-positive or unparsable step is an input error."""
    try:
        return parse_duration(freq, name="frequency")
    except DurationError as exc:
        raise ForecastInputError(str(exc)) from exc


def check_levels(level: Iterable[float]) -> tuple[int, ...]:
    """Interval levels as sorted unique ints in (0, 100): they become column names ``lo-80``."""
    levels: list[int] = []
    for raw in level:
        value = float(raw)
        if not value.is_integer() or not 0 < value < 100:
            raise ForecastInputError(f"interval level must be an integer in (0, 100), got {raw!r}")
        levels.append(int(value))
    return tuple(sorted(set(levels)))


def _impute(values: np.ndarray) -> np.ndarray:
    """Linear interpolation inside gaps, nearest value at the edges (a drain stays a drain)."""
    observed = ~np.isnan(values)
    if observed.all():
        return values.copy()
    positions = np.arange(values.shape[0])
    return np.asarray(np.interp(positions, positions[observed], values[observed]), dtype="float64")


def regularize(frame: pd.DataFrame, freq: str | pd.Timedelta = "1h") -> list[RegularSeries]:
    """Per-series regular arrays from a long frame, sorted by series id.

    Rows with a missing value count as missing hours; the grid still ends at the last row's timestamp.
    """
    for column in (ID, TIME, VALUE):
        if column not in frame.columns:
            raise ForecastInputError(f"history frame lacks column {column!r}")
    if frame.empty:
        raise ForecastInputError("history frame has no rows")
    step = parse_freq(freq)
    times = frame[TIME]
    if not isinstance(times.dtype, pd.DatetimeTZDtype):
        raise ForecastInputError(f"column {TIME!r} must be tz-aware timestamps (UTC)")
    values = pd.to_numeric(frame[VALUE], errors="coerce").astype("float64")
    work = pd.DataFrame({ID: frame[ID].astype(str), TIME: times.dt.tz_convert("UTC"), VALUE: values})
    if work.duplicated([ID, TIME]).any():
        row = work[work.duplicated([ID, TIME])].iloc[0]
        raise ForecastInputError(f"duplicate timestamp {row[TIME].isoformat()} in series {row[ID]!r}")
    out: list[RegularSeries] = []
    for series_id, group in work.sort_values([ID, TIME], kind="stable").groupby(ID, sort=True):
        start = group[TIME].iloc[0]
        offsets = (group[TIME] - start) / step
        positions = offsets.to_numpy(dtype="float64")
        if not np.allclose(positions, np.round(positions)):
            bad = group[TIME].iloc[int(np.argmax(np.abs(positions - np.round(positions))))]
            raise ForecastInputError(
                f"series {series_id!r}: timestamp {bad.isoformat()} is not on the {step} grid from {start}"
            )
        grid = np.full(round(positions[-1]) + 1, np.nan)
        grid[np.round(positions).astype(np.int64)] = group[VALUE].to_numpy()
        observed = ~np.isnan(grid)
        if not observed.any():
            raise ForecastInputError(f"series {series_id!r} has no numeric values")
        out.append(RegularSeries(str(series_id), start, step, _impute(grid), observed))
    return out


def to_frame(series: Sequence[RegularSeries]) -> pd.DataFrame:
    """Back to a long history frame, observed points only (used to truncate series in backtests)."""
    parts = []
    for s in series:
        index = s.index()[s.observed]
        parts.append(pd.DataFrame({ID: s.series_id, TIME: index, VALUE: s.values[s.observed]}))
    return pd.concat(parts, ignore_index=True)
