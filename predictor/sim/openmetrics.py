"""Streaming OpenMetrics writer that ``promtool tsdb create-blocks-from openmetrics`` accepts.

promtool needs each family contiguous with one ``# TYPE``, every sample timestamped in seconds, each
series in time order and a final ``# EOF``; out-of-order samples are dropped silently and millisecond
timestamps land in the year 58,000, so both are made impossible here rather than checked later.
Formatting is vectorised: a series becomes one byte matrix (label prefix | value digits | timestamp)
whose padding bytes are dropped in one mask, because Python string formatting of tens of millions of
samples would dominate the run time.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

import numpy as np

from predictor.atomicio import atomic_open
from predictor.sim.series import Family, StepGrid, label_string

__all__ = ["format_fixed", "write_openmetrics"]

_ZERO = ord("0")


def format_fixed(values: np.ndarray, decimals: int) -> np.ndarray:
    """Non-negative values as a ``[n, width]`` uint8 matrix of ASCII digits, zero bytes as padding."""
    scaled = np.rint(np.asarray(values, dtype=np.float64) * 10.0**decimals)
    q = np.maximum(scaled, 0).astype(np.int64)
    top = int(q.max()) if len(q) else 0
    width = max(len(str(top)), decimals + 1)
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    digits = (q[:, None] // powers[None, :]) % 10
    out = (digits + _ZERO).astype(np.uint8)
    # Blank leading zeros but keep the units digit (and every fraction digit).
    lead = np.cumsum(digits, axis=1) == 0
    lead[:, width - decimals - 1 :] = False
    out[lead] = 0
    if decimals:
        point = np.full((len(q), 1), ord("."), dtype=np.uint8)
        out = np.hstack([out[:, : width - decimals], point, out[:, width - decimals :]])
    return out


_SMALL = 48  # below this many samples plain string formatting beats building byte matrices


def _series_bytes(
    prefix: bytes, stamps: np.ndarray, texts: list[str], steps: np.ndarray, values: np.ndarray, decimals: int
) -> bytes:
    """Lines ``prefix value timestamp`` for one series; ``stamps``/``texts``: the grid's timestamps formatted."""
    n = len(values)
    if n <= _SMALL:
        head = prefix.decode()
        scaled = np.maximum(np.rint(values * 10.0**decimals), 0) / 10.0**decimals
        return "".join(
            f"{head}{v:.{decimals}f} {texts[k]}\n" for v, k in zip(scaled.tolist(), steps.tolist(), strict=True)
        ).encode()
    val = format_fixed(values, decimals)
    tsm = stamps[steps]
    prefix_bytes = np.frombuffer(prefix, dtype=np.uint8)
    rows = np.empty((n, len(prefix_bytes) + val.shape[1] + 1 + tsm.shape[1] + 1), dtype=np.uint8)
    p = len(prefix_bytes)
    rows[:, :p] = prefix_bytes
    rows[:, p : p + val.shape[1]] = val
    p += val.shape[1]
    rows[:, p] = ord(" ")
    rows[:, p + 1 : p + 1 + tsm.shape[1]] = tsm
    rows[:, -1] = ord("\n")
    return bytes(rows[rows != 0].tobytes())


def write_family(out: BinaryIO, family: Family, grid: StepGrid, stamps: np.ndarray | None = None) -> int:
    """Write one family; returns the number of samples written."""
    texts = [str(t) for t in grid.times_s().tolist()]
    out.write(f"# TYPE {family.family_name} {family.kind}\n".encode())
    out.write(f"# HELP {family.family_name} {family.help}\n".encode())
    if stamps is None:
        stamps = format_fixed(grid.times_s(), 0)
    written = 0
    for labels, steps, values in family.series():
        keep = np.isfinite(values)
        if not keep.all():
            steps, values = steps[keep], values[keep]
        if len(steps) == 0:
            continue
        prefix = f"{family.name}{label_string(labels)} ".encode()
        out.write(_series_bytes(prefix, stamps, texts, steps, values, family.decimals))
        written += len(steps)
    return written


def write_openmetrics(path: Path, families: Iterable[Family], grid: StepGrid) -> int:
    """Write every family to ``path`` (atomically) followed by ``# EOF``; returns samples written."""
    total = 0
    stamps = format_fixed(grid.times_s(), 0)  # every timestamp formatted once per file
    with atomic_open(path, "wb", buffering=1 << 22) as out:
        for family in families:
            total += write_family(out, family, grid, stamps)
        out.write(b"# EOF\n")
    return total
