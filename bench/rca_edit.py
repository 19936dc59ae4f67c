"""Edits of ``WindowData`` matrices for fault injection: an effect's envelope, which series a fault touches,
and gauge/counter changes that keep counters monotone (a fault changes a counter's per-step increments and
the series is summed again, so its rate rises during the fault and the total never falls)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import pandas as pd

from models.rca_window import WindowData, col, node_of

__all__ = ["append", "blend", "cols_of", "counter", "envelope", "scale", "set_where_held"]


class Labelled(Protocol):
    """A family's table: one row of labels per series."""

    @property
    def labels(self) -> pd.DataFrame: ...


def envelope(shape: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Per step of a fault, how much of its effect shows (0..1): a step, a ramp or bursts."""
    if shape == "ramp":
        return np.linspace(0.15, 1.0, n)
    if shape == "intermittent":
        out, k, on = np.zeros(n), 0, True
        while k < n:
            length = int(rng.integers(2, 6))
            out[k : k + length] = 1.0 if on else 0.0
            k, on = k + length, not on
        return out
    return np.ones(n)


def cols_of(
    t: Labelled, nodes: Sequence[str], gpus: Sequence[str] | None = None, where: dict[str, str] | None = None
) -> np.ndarray:
    keep = np.isin(node_of(t.labels), list(nodes))
    if gpus is not None:
        keep &= np.isin(col(t.labels, "gpu"), list(gpus))
    for k, v in (where or {}).items():
        keep &= col(t.labels, k) == v
    return np.flatnonzero(keep)


def scale(
    data: WindowData, name: str, cols: np.ndarray, k0: int, k1: int, mult: float | np.ndarray, e: np.ndarray
) -> None:
    t = data.tables.get(name)
    if t is None or not len(cols):
        return
    t.values[k0:k1, cols] *= 1 + e[:, None] * (np.asarray(mult) - 1)


def blend(
    data: WindowData, name: str, cols: np.ndarray, k0: int, k1: int, target: float | np.ndarray, e: np.ndarray
) -> None:
    t = data.tables.get(name)
    if t is None or not len(cols):
        return
    block = t.values[k0:k1][:, cols]
    t.values[k0:k1, cols] = block + e[:, None] * (target - block)


def counter(
    data: WindowData,
    name: str,
    cols: np.ndarray,
    k0: int,
    k1: int,
    e: np.ndarray,
    *,
    mult: float = 1.0,
    add: float | np.ndarray = 0.0,
    floor: float = 0.0,
) -> None:
    """Scale a counter's increments by ``mult`` and add ``add`` per step during ``[k0, k1)`` (times ``e``);
    ``floor`` is a least increment per step (CPU seconds of a busy core)."""
    t = data.tables.get(name)
    if t is None or not len(cols):
        return
    v = t.values[:, cols]
    seen = np.isfinite(v)
    started = np.maximum.accumulate(seen, axis=0)
    # Forward-filled, so the increase over a scrape gap lands on the sample after it.
    filled = pd.DataFrame(v).ffill().to_numpy()
    inc = np.diff(filled, axis=0, prepend=filled[:1])
    inc = np.where(started & np.isfinite(inc), np.maximum(inc, 0), 0.0)
    block = inc[k0:k1] * (1 + e[:, None] * (mult - 1)) + e[:, None] * np.asarray(add)
    inc[k0:k1] = np.where(started[k0:k1], np.maximum(block, e[:, None] * floor), 0.0)
    first = v[np.argmax(seen, axis=0), np.arange(len(cols))]
    t.values[:, cols] = np.where(seen, np.nan_to_num(first) + np.cumsum(inc, axis=0), np.nan)


def set_where_held(data: WindowData, name: str, cols: np.ndarray, k0: int, k1: int, value: np.ndarray | float) -> None:
    t = data.tables.get(name)
    if t is None or not len(cols):
        return
    block = t.values[k0:k1][:, cols]
    t.values[k0:k1, cols] = np.where(np.isfinite(block), value, np.nan)


def append(data: WindowData, name: str, values: np.ndarray, labels: pd.DataFrame) -> None:
    """Add series (columns of ``values``, one ``labels`` row each) to family ``name``, creating it if absent."""
    t = data.tables.get(name)
    if t is not None:
        values = np.column_stack([t.values, values])
        labels = pd.concat([t.labels, labels], ignore_index=True).fillna("")
    data.tables[name] = WindowData.from_matrices(data.times, {name: (values, labels)}).tables[name]
