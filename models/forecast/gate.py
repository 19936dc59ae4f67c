"""Which series ``auto`` serves its seasonal pool: a strong daily cycle over the last ``GATE_DAYS`` days.

Why a gate (``models.forecast.selection``, docs/design.md "A seasonal pool behind a daily-cycle gate"): the
pool that wins where demand cycles daily (LSTM + ``level_profile``) loses badly where it wanders, and one
scale-free number per series, ``daily_strength``, separates the two kinds of trace the benchmark has. It is
decided from the history a fit trains on, once per fit, and replayed per backtest origin by
``records_for_auto`` from the history each series had there (``cut_at``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from models.forecast.decomposition import daily_strength, steps_per_day
from models.forecast.prep import ForecastInputError, RegularSeries
from models.forecast.selection import SelectionRule
from models.frames import ID, TIME

__all__ = ["GATE_DAYS", "cut_at", "seasonal_ids"]

GATE_DAYS = 14  # days of history the daily cycle's strength is measured over


def seasonal_ids(series: Sequence[RegularSeries], rule: SelectionRule) -> frozenset[str]:
    """The series served the rule's seasonal pool: a daily cycle at least ``seasonal_from`` strong over the last
    ``GATE_DAYS`` days, with that much history (a shorter one, or a grid that does not divide a day, is not
    judged: the plain pool serves it)."""
    if not rule.seasonal_pool:
        return frozenset()
    out = set()
    for s in series:
        try:
            per_day = steps_per_day(s.freq)
        except ForecastInputError:
            return frozenset()
        if len(s) >= GATE_DAYS * per_day and rule.for_strength(daily_strength(s.values, per_day, GATE_DAYS)) != rule:
            out.add(s.series_id)
    return frozenset(out)


def cut_at(grid: Mapping[str, RegularSeries], here: pd.DataFrame) -> list[RegularSeries]:
    """Each series of ``grid`` up to the step before its first forecast in ``here`` (one backtest window)."""
    first = here.groupby(ID)[TIME].min()
    out = []
    for sid, stamp in first.items():
        s = grid.get(str(sid))
        if s is not None:
            k = int(max(0, min(len(s), (pd.Timestamp(stamp) - s.start) // s.freq)))
            out.append(RegularSeries(s.series_id, s.start, s.freq, s.values[:k], s.observed[:k]))
    return out
