"""Long frames on disk: CSV or Parquet chosen by extension, read leniently, written atomically.

Every ``--history FILE`` option reads through ``read_history``; every ``--out FILE`` writes through
``write_frame`` so a failed command never leaves a half-written file behind.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from models.frames import ID, TIME, VALUE, empty_history
from predictor.atomicio import atomic_path
from predictor.bounds import check_times
from predictor.errors import InputError
from predictor.userfiles import check_size

__all__ = ["SUFFIXES", "FileSource", "parse_timestamps", "read_frame", "read_history", "write_frame"]

SUFFIXES = (".csv", ".parquet", ".pq")


def _check_suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise InputError(f"{path}: unknown file extension {path.suffix!r} (use .csv or .parquet)")
    return suffix


def read_frame(path: Path) -> pd.DataFrame:
    """Read a CSV or Parquet file as it is, with errors that name the file."""
    suffix = _check_suffix(path)
    if not path.is_file():
        raise InputError(f"{path}: {'is a directory, not a file' if path.is_dir() else 'no such file'}")
    check_size(path, "table", InputError, "table")
    try:
        if suffix == ".csv":
            # low_memory=False: in chunks, pandas warns about a column whose type changes between chunks
            # (two lines on stderr before our one error line, or on a good run); whole, it just reads it.
            return pd.read_csv(path, low_memory=False)
        return pd.read_parquet(path)
    except pd.errors.EmptyDataError as exc:
        raise InputError(f"{path}: the file is empty") from exc
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise InputError(f"{path}: cannot read as {suffix[1:]}: {exc}".splitlines()[0]) from exc


def parse_timestamps(column: pd.Series, path: Path, name: str) -> pd.Series:
    """Parse a file's timestamp column; naive ones are taken as UTC, aware ones converted to UTC.

    Errors are one line naming the file, the column and the first bad value (pandas' own message spans
    several lines of advice).
    """
    if pd.api.types.is_numeric_dtype(column):
        raise InputError(f"{path}: column {name!r} holds numbers, expected ISO 8601 timestamps")
    try:
        parsed = pd.to_datetime(column, utc=True, format="ISO8601")
    except (ValueError, TypeError, OverflowError) as exc:
        # pandas' message goes on with advice for programmers ("You might want to try: passing format=…")
        first = (str(exc).split(" You might want to try")[0].splitlines() or [type(exc).__name__])[0]
        raise InputError(f"{path}: column {name!r} has a value that is not a timestamp: {first}") from exc
    if parsed.isna().any():
        row = int(parsed.isna().to_numpy().argmax())
        raise InputError(f"{path}: column {name!r} is empty at row {row + 2}")
    # pandas parses 2300-01-01 at a coarser unit; as nanoseconds it would not fit (or would wrap).
    check_times(parsed, f"{path}: column {name!r} value")
    return parsed.astype("datetime64[ns, UTC]")


def _check_values(values: pd.Series, path: Path, name: str) -> None:
    """The rule for history values: every one finite and ≥ 0 (GPUs, utilisation and demand never go below 0).

    An empty cell, NaN or ±Inf is an error naming its row rather than a sample silently dropped by a model;
    a negative value is an error rather than a forecast clipped to zero. Drop a row to leave a gap.
    """
    array = values.to_numpy(dtype="float64")
    for problem, mask in (("empty, NaN or infinite", ~np.isfinite(array)), ("negative", array < 0)):
        if mask.any():
            row = int(mask.argmax())
            raise InputError(
                f"{path}: column {name!r} is {problem} at row {row + 2} ({array[row]!r}); "
                "history values must be finite and >= 0 (drop the row to leave a gap)"
            )


def read_history(
    path: Path,
    *,
    time_col: str = TIME,
    id_col: str = ID,
    value_col: str = VALUE,
    allow_duplicates: bool = False,
) -> pd.DataFrame:
    """A history frame (``series_id, timestamp, value`` + labels) from a long CSV/Parquet file.

    Columns are renamed to the standard names; a missing id column means one series named after the
    file. Duplicate (series, timestamp) pairs, non-numeric values and empty files are input errors.
    """
    raw = read_frame(path)
    if raw.empty:
        raise InputError(f"{path}: the file has no rows")
    for needed in (time_col, value_col):
        if needed not in raw.columns:
            known = ", ".join(map(str, raw.columns))
            raise InputError(f"{path}: missing column {needed!r} (columns: {known})")
    frame = raw.rename(columns={time_col: TIME, value_col: VALUE, id_col: ID})
    if ID not in frame.columns:
        frame[ID] = path.stem
    frame[ID] = frame[ID].astype(str)
    frame[TIME] = parse_timestamps(frame[TIME], path, time_col)
    values = pd.to_numeric(frame[VALUE], errors="coerce")
    bad = values.isna() & frame[VALUE].notna()
    if bad.any():
        row = int(bad.to_numpy().argmax())
        raise InputError(f"{path}: column {value_col!r} is not numeric (row {row + 2}: {frame[VALUE].iloc[row]!r})")
    frame[VALUE] = values.astype("float64")
    _check_values(frame[VALUE], path, value_col)
    if not allow_duplicates:
        dup = frame.duplicated([ID, TIME])
        if dup.any():
            first = frame[dup].iloc[0]
            raise InputError(f"{path}: duplicate timestamp {first[TIME].isoformat()} in series {first[ID]!r}")
    labels = [c for c in frame.columns if c not in (ID, TIME, VALUE)]
    return frame[[ID, TIME, VALUE, *labels]].sort_values([ID, TIME], kind="stable").reset_index(drop=True)


def write_frame(frame: pd.DataFrame, path: Path) -> Path:
    """Write ``frame`` to CSV/Parquet atomically (``predictor.atomicio``).

    Timestamps are written as ISO 8601 in UTC. Returns the path written.
    """
    suffix = _check_suffix(path)
    out = frame.copy()
    with atomic_path(path) as tmp:
        if suffix == ".csv":
            for column in out.columns:
                if isinstance(out[column].dtype, pd.DatetimeTZDtype):
                    out[column] = out[column].dt.tz_convert("UTC").map(lambda t: t.isoformat().replace("+00:00", "Z"))
            out.to_csv(tmp, index=False)
        else:
            out.to_parquet(tmp, index=False)
    return path


class FileSource:
    """A ``MetricSource`` over one long history file; ``query`` filters by series id or ``__name__``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._frame: pd.DataFrame | None = None

    def history(self) -> pd.DataFrame:
        if self._frame is None:
            self._frame = read_history(self.path)
        return self._frame

    def query_range(
        self, query: str, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta | None = None
    ) -> pd.DataFrame:
        """Samples of the series whose id or metric name equals ``query`` within ``[start, end]``."""
        frame = self.history()
        match = frame[ID] == query
        if "__name__" in frame.columns:
            match |= frame["__name__"] == query
        window = frame[match & (frame[TIME] >= start) & (frame[TIME] <= end)]
        if window.empty:
            return empty_history([c for c in frame.columns if c not in (ID, TIME, VALUE)])
        return window.reset_index(drop=True)
