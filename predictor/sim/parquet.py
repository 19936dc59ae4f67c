"""Parquet long frames of simulated metrics: one file per metric family, in the project's frame shape.

One file per family keeps each write bounded (a five-week family is tens of millions of rows) and lets a
reader load only the families it needs; the columns are the history frame's (``series_id, timestamp,
value``) plus one dictionary-encoded column per label, so ``predictor.sources.read_metrics`` returns a
frame every model accepts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from models.frames import ID, TIME, VALUE
from predictor.atomicio import atomic_path
from predictor.sim.series import Family, Series, StepGrid, label_string

__all__ = ["write_parquet", "write_parquet_family"]


def write_parquet_family(path: Path, family: Family, grid: StepGrid) -> int:
    """Write one family as a long frame; returns rows written (0 writes nothing)."""
    times = grid.times_s()
    codes: list[np.ndarray] = []
    stamps: list[np.ndarray] = []
    values: list[np.ndarray] = []
    label_sets: list[dict[str, str]] = []
    for labels, steps, vals in family.series():
        keep = np.isfinite(vals)
        if not keep.all():
            steps, vals = steps[keep], vals[keep]
        if len(steps) == 0:
            continue
        codes.append(np.full(len(steps), len(label_sets), dtype=np.int32))
        stamps.append(times[steps] * 1_000_000_000)
        values.append(vals.astype(np.float64))
        label_sets.append(labels)
    if not label_sets:
        return 0
    code = np.concatenate(codes)
    keys = list(dict.fromkeys(k for labels in label_sets for k in labels))
    columns: dict[str, pa.Array] = {
        ID: pa.DictionaryArray.from_arrays(
            pa.array(code), pa.array([family.name + label_string(lbl) for lbl in label_sets])
        ),
        TIME: pa.array(np.concatenate(stamps), type=pa.timestamp("ns", tz="UTC")),
        VALUE: pa.array(np.concatenate(values)),
        "__name__": pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(len(code), dtype=np.int32)), pa.array([family.name])
        ),
    }
    for key in keys:
        dictionary = sorted({lbl.get(key, "") for lbl in label_sets})
        lookup = {v: i for i, v in enumerate(dictionary)}
        per_set = np.array([lookup[lbl.get(key, "")] for lbl in label_sets], dtype=np.int32)
        columns[key] = pa.DictionaryArray.from_arrays(pa.array(per_set[code]), pa.array(dictionary))
    with atomic_path(path) as tmp:
        pq.write_table(pa.table(columns), tmp, compression="zstd")
    return len(code)


def write_parquet(directory: Path, families: Iterable[Family], grid: StepGrid) -> int:
    """One ``<family>.parquet`` per family under ``directory``; families sharing a name are merged."""
    merged: dict[str, list[Family]] = {}
    for family in families:
        merged.setdefault(family.name, []).append(family)
    total = 0
    for name, parts in merged.items():
        family = parts[0] if len(parts) == 1 else _merged(name, parts)
        total += write_parquet_family(directory / f"{name}.parquet", family, grid)
    return total


def _merged(name: str, parts: list[Family]) -> Family:
    def series() -> Iterator[Series]:
        for part in parts:
            yield from part.series()

    return Family(name, parts[0].kind, parts[0].help, series, parts[0].decimals)
