"""``auto`` replayed on one long backtest of its candidates: how the pipeline scores it without refitting.

At outer window ``o`` a fit of ``auto`` would backtest its candidates on windows ``o+1..o+inner`` of the same
cuts and serve its members' forecasts at ``o``; ``records_for_auto`` does exactly that from the records of a
single backtest (exact when ``step == horizon``; tests pin that it serves what a fit at that origin serves).
Split from ``models.forecast.auto`` so that module stays the estimator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pandas as pd

from models.forecast.auto import (
    ENSEMBLE_SIZES,
    FALLBACK,
    SeriesPlan,
    _members_from_frame,
    _slow_name,
    combine,
    plan_from_records,
)
from models.forecast.backtest import BacktestResult
from models.forecast.base import _tidy
from models.forecast.gate import cut_at, seasonal_ids
from models.forecast.memberwise import FRESH_WINDOWS
from models.forecast.prep import regularize
from models.forecast.selection import DEFAULT_RULE, SelectionRule
from models.frames import ID, TIME

__all__ = ["records_for_auto"]


def records_for_auto(
    result: BacktestResult,
    outer_windows: int,
    inner_windows: int,
    ensemble_sizes: Sequence[int] = ENSEMBLE_SIZES,
    rule: SelectionRule = DEFAULT_RULE,
    history: pd.DataFrame | None = None,
    freq: str = "1h",
) -> pd.DataFrame:
    """Backtest records of ``auto`` at windows ``0..outer_windows-1`` from a backtest of its candidates.

    At outer window ``o`` auto would backtest on windows ``o+1..o+inner_windows`` of the same cuts (exact
    when ``step == horizon``) and then serve its members' forecasts at ``o``: that is what is replayed. The
    seasonal gate needs the ``history`` the backtest ran on (each series cut at the origin); without it, or for a
    series it lacks, the plain pool plans the series.
    """
    if not set(rule.seasonal_pool) <= set(result.records["model"].unique()):  # as AutoForecaster.rule()
        rule = replace(rule, seasonal_pool=(), seasonal_weights=())
    grid = {s.series_id: s for s in regularize(history, freq)} if history is not None and rule.seasonal_pool else {}
    records = result.records
    levels = result.levels
    # as auto's own backtest: a slow member (the LSTM) only at the newest inner origin (models.forecast.memberwise)
    slow = [m for m in records["model"].unique() if _slow_name(str(m))]
    parts = []
    for outer in range(outer_windows):
        inner = records[(records["window"] > outer) & (records["window"] <= outer + inner_windows)]
        inner = inner[~inner["model"].isin(slow) | (inner["window"] < outer + 1 + FRESH_WINDOWS)].copy()
        inner["window"] -= outer + 1
        here = records[records["window"] == outer]
        seasonal = seasonal_ids(cut_at(grid, here), rule) if grid else frozenset()
        plans = plan_from_records(inner, ensemble_sizes, rule, seasonal) if not inner.empty else {}
        for sid, g in here.groupby(ID, sort=True):
            plan = plans.get(str(sid), SeriesPlan(weights={FALLBACK: 1.0}))
            by_model = {m: gm.sort_values("lead") for m, gm in g.groupby("model")}
            if not set(plan.weights) <= set(by_model):
                continue
            members = {m: _members_from_frame(by_model[m], levels)[str(sid)] for m in plan.weights}
            mean, bands = combine(plan, members, levels)
            mean, bands = _tidy(mean, bands, levels, fallback=float(mean[0]) if mean.size else 0.0)
            base = by_model[next(iter(plan.weights))]
            part = pd.DataFrame({"model": "auto", "window": outer, ID: sid, TIME: base[TIME].to_numpy(), "mean": mean})
            for lvl in levels:
                part[f"lo-{lvl}"], part[f"hi-{lvl}"] = bands[lvl]
            part["lead"] = base["lead"].to_numpy()
            part["actual"] = base["actual"].to_numpy()
            part["choice"] = plan.choice
            parts.append(part)
    return pd.concat(parts, ignore_index=True) if parts else records.iloc[0:0]
