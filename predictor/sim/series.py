"""The seam between metric generation and the writers: a time grid and metric families of series.

A family yields its series one at a time (labels, step indices, values) so a writer can stream a whole
family — which promtool needs contiguous, each series in time order — without ever holding every sample
of a five-week run as Python objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from predictor.errors import InputError

__all__ = ["Family", "Series", "StepGrid", "epoch_s"]

Series = tuple[dict[str, str], np.ndarray, np.ndarray]
Kind = Literal["gauge", "counter", "unknown"]


def epoch_s(values: pd.Series) -> np.ndarray:
    """UTC timestamps as int64 epoch seconds, whatever the column's datetime resolution."""
    return np.asarray(pd.DatetimeIndex(values).as_unit("s").asi8, dtype=np.int64)


@dataclass(frozen=True)
class StepGrid:
    """Sample times ``start_s + k * step_s`` for ``k in [0, n_steps)`` (epoch seconds, UTC)."""

    start_s: int
    step_s: int
    n_steps: int

    @classmethod
    def between(cls, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta) -> StepGrid:
        step_s = int(step.total_seconds())
        if step_s < 1 or step.total_seconds() != step_s:
            raise InputError(f"step must be a whole number of seconds >= 1, got {step}")
        start_s = int(pd.Timestamp(start).timestamp())
        end_s = int(pd.Timestamp(end).timestamp())
        if end_s <= start_s:
            raise InputError(f"end {end} is not after start {start}")
        return cls(start_s, step_s, -(-(end_s - start_s) // step_s))

    @property
    def end_s(self) -> int:
        return self.start_s + self.n_steps * self.step_s

    def times_s(self) -> np.ndarray:
        return self.start_s + np.arange(self.n_steps, dtype=np.int64) * self.step_s

    def index(self) -> pd.DatetimeIndex:
        return pd.to_datetime(self.times_s(), unit="s", utc=True)

    def step_range(self, start_s: float, end_s: float) -> tuple[int, int]:
        """Steps whose sample time lies in ``[start_s, end_s)``, clipped to the grid."""
        k0 = int(np.ceil((start_s - self.start_s) / self.step_s))
        k1 = int(np.ceil((end_s - self.start_s) / self.step_s))
        return max(k0, 0), min(max(k1, 0), self.n_steps)


@dataclass(frozen=True)
class Family:
    """One metric family: ``name`` is the sample name (``…_total`` for node counters)."""

    name: str
    kind: Kind
    help: str
    series: Callable[[], Iterator[Series]]
    decimals: int = 0

    @property
    def family_name(self) -> str:
        """The OpenMetrics family name: counters drop a trailing ``_total``."""
        if self.kind == "counter" and self.name.endswith("_total"):
            return self.name[: -len("_total")]
        return self.name


def label_string(labels: dict[str, str]) -> str:
    """``{a="x",b="y"}`` with OpenMetrics escaping (backslash, quote, newline)."""
    if not labels:
        return ""
    parts = []
    for key, value in labels.items():
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        parts.append(f'{key}="{escaped}"')
    return "{" + ",".join(parts) + "}"
