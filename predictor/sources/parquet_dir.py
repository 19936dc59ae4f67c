"""A directory of per-metric Parquet files (``<family>.parquet``, as ``predictor simulate`` writes them).

Reading is a source's job, not the simulator's: right-sizing and the reports read such a directory at
runtime, and must not import the simulator to do it. The writer is ``predictor.sim.write_parquet``; the
files hold the history frame's columns plus one dictionary-encoded column per label.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from models.frames import VALUE
from predictor.errors import InputError
from predictor.userfiles import check_size

__all__ = ["read_metrics"]


def _read(path: Path) -> pd.DataFrame:
    """One metric file; a file that is not Parquet, or whose values are not numbers, is one error naming it."""
    check_size(path, "table", InputError, "table")
    try:
        frame: pd.DataFrame = pq.read_table(path).to_pandas()
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise InputError(f"{path}: cannot read as parquet: {exc}".splitlines()[0]) from exc
    if VALUE in frame.columns and not pd.api.types.is_numeric_dtype(frame[VALUE]):
        raise InputError(f"{path}: column {VALUE!r} is not numeric ({frame[VALUE].dtype})")
    return frame


def read_metrics(directory: Path, names: Sequence[str] | None = None) -> pd.DataFrame:
    """Load metric families written by ``write_parquet`` as one long history frame."""
    files = sorted(directory.glob("*.parquet")) if names is None else [directory / f"{n}.parquet" for n in names]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise InputError(f"{directory}: no metric file(s) {', '.join(missing)}")
    if not files:
        raise InputError(f"{directory}: no metric files")
    frames: list[pd.DataFrame] = [_read(f) for f in files]
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    for column in frame.columns:
        if isinstance(frame[column].dtype, pd.CategoricalDtype):
            frame[column] = frame[column].astype(str)
    return frame
