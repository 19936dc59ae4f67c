"""``auto``: per series, serve a robust pool unless the rolling backtest clearly prefers something else.

The candidates are backtested on the last ``windows`` origins of the training history (the LSTM only at the
newest, by one network trained there: ``models.forecast.memberwise`` says why). What is served is
decided by ``models.forecast.selection``: a weighted *pool* (by default LSTM 0.8, naive 0.1, drift 0.1),
replaced by a single model or an inverse-loss-weighted ensemble of the best 2–5 only when it beats the
pool's backtest MAE by ``margin`` (a regularised choice: a few windows of one series are thin evidence, and
picking the per-series winner among many options overfitted on traces it was not tuned on; by default
``margin`` is 1, so the pool is always served and only its members are fitted). Intervals are
conformalised quantile bands (CQR), two-sided and per member: each member's bands move out or in by a
quantile of its own backtest misses (the LSTM's from its one fresh window), taken at miscoverage
``(1 - L) * gamma`` because backtest windows are not exchangeable with the future (``gamma`` tuned on
held-out traces by ``bench/forecast.py``), and are then weighted like the means. The choice among options
(``margin`` < 1) is made on the windows every candidate was backtested on. A level the backtest did
not record uses residual quantiles per day of lead. Series too short for any backtest fall back to
persistence with its own empirical bands, and ``notes_`` says so.

Serving (``update``) keeps every fitted per-series plan (choice, weights, conformal scores) and updates
its members on the new window; nothing is backtested or trained. A series the plan does not cover (not
seen at fit time, or now too short for a member of its plan) is served the robust default: the pool, its
weights renormalised over the members that can forecast it (any member if no pool member can, else
persistence), with the members' own bands, uncalibrated; ``notes_`` names those series.

``models.forecast.auto_replay.records_for_auto`` replays exactly this selection on a longer backtest's cached
records, which is how the pipeline scores ``auto`` without refitting every candidate at every nested origin.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from sklearn.base import clone

from models.forecast.backtest import BacktestResult
from models.forecast.base import Bands, BaseForecaster, PointForecast
from models.forecast.gate import seasonal_ids
from models.forecast.memberwise import (
    FRESH_WINDOWS,
    calibrate_members,
    calibrate_pool,
    member_halfwidths,
    member_scores,
    residual_bands,
)
from models.forecast.parallel import Workers, backtest_part, by_series, fit_model, merge_backtests, spare_workers
from models.forecast.prep import ForecastInputError, RegularSeries, to_frame
from models.forecast.registry import forecasters
from models.forecast.selection import DEFAULT_RULE, SelectionRule, choose, label_of, pool_weights
from models.frames import ID

__all__ = [
    "DEFAULT_CANDIDATES",
    "AutoForecaster",
    "SeriesPlan",
    "plan_from_records",
    "seasonal_ids",
]

DEFAULT_CANDIDATES = (
    "naive",
    "drift",
    "seasonal_naive_24",
    "seasonal_naive_168",
    "window_mean_24",
    "window_mean_168",
    "seasonal_mean_24",
    "seasonal_median_24",
    "level_profile",
    "ets",
    "mstl",
    "lstm",
)
FALLBACK = "naive"
CALIBRATED_LEVELS = (50, 80, 90, 95)  # levels whose bands auto conformalises on its backtest
ENSEMBLE_SIZES = DEFAULT_RULE.ensemble_sizes  # inverse-MAE ensembles of the best k


@dataclass
class SeriesPlan:
    """What ``auto`` serves for one series and the residuals its intervals come from."""

    weights: dict[str, float]
    errors: np.ndarray | None = None  # (windows, horizon): actual − served mean; NaN where not observed
    band_scores: dict[int, np.ndarray] = field(default_factory=dict)  # CQR scores per level (observed only)
    choice: str = FALLBACK
    scores: dict[str, float] = field(default_factory=dict)  # backtest MAE of every option considered
    gamma: float = 1.0  # miscoverage multiplier of the conformal step (see the module docstring)
    # per member and level: its own CQR scores (models.forecast.memberwise); None: the pool's band_scores
    member_scores: dict[str, dict[int, np.ndarray]] | None = None
    # per slow member and level: its calibrating band's half-width per lead; its shift is scaled to the served band
    member_halfwidths: dict[str, dict[int, np.ndarray]] | None = None
    windows: int = 0  # the most backtest windows any member of the plan was scored on


def plan_from_records(
    records: pd.DataFrame,
    ensemble_sizes: Sequence[int] = ENSEMBLE_SIZES,
    rule: SelectionRule = DEFAULT_RULE,
    seasonal: Collection[str] = frozenset(),
) -> dict[str, SeriesPlan]:
    """Per-series choice from backtest records (``model, window, series_id, lead, mean, actual``); the
    series in ``seasonal`` (a strong daily cycle: ``seasonal_ids``) are planned with the rule's seasonal pool."""
    every_rule = SelectionRule(**{**rule.__dict__, "ensemble_sizes": tuple(ensemble_sizes)})
    plans: dict[str, SeriesPlan] = {}
    slow = {str(m) for m in records["model"].unique() if _slow_name(str(m))}
    for series_id, g in records.groupby(ID, sort=True):
        every_window = g  # before g narrows to the windows every candidate shares: each member's own errors
        newest = int(g["window"].min())
        candidates = sorted(g.loc[g["window"] == newest, "model"].unique())
        rule = every_rule
        if str(series_id) in seasonal and set(every_rule.seasonal_pool) <= set(candidates):
            # a member without a backtest here (level_profile needs 14 days before the origin): the plain pool
            rule = every_rule.for_strength(1.0)
        models_at = g.groupby("window")["model"].unique()
        windows = sorted(int(str(w)) for w, ms in models_at.items() if set(candidates) <= set(ms))
        g = g[g["window"].isin(windows) & g["model"].isin(candidates)]
        levels = _record_levels(g)
        band_columns = [f"{side}-{level}" for level in levels for side in ("lo", "hi")]
        # one pivot of every column per series, read as arrays: a pivot per (column, model) took ~0.1 s CPU a
        # series, most of a 2,000-queue fleet forecast's time outside the LSTM
        pivoted = g.pivot_table(index=["window", "lead"], columns="model", values=["mean", *band_columns], dropna=False)
        table = pivoted.to_numpy(float)
        # (column, model) → values over (window, lead)
        keys = zip(pivoted.columns.get_level_values(0), pivoted.columns.get_level_values(1), strict=True)
        cells: dict[tuple[str, str], np.ndarray] = {(str(c), str(m)): table[:, i] for i, (c, m) in enumerate(keys)}
        observed = g.drop_duplicates(["window", "lead"]).set_index(["window", "lead"])["actual"]
        actual = observed.reindex(pivoted.index).to_numpy(float)
        scored = np.isfinite(actual)
        if not scored.any():
            plans[str(series_id)] = SeriesPlan(weights={FALLBACK: 1.0}, gamma=rule.gamma)
            continue
        horizon = int(g["lead"].max())
        shape = (len(windows), horizon)
        preds = {m: cells["mean", m].reshape(shape) for m in candidates}
        label, weights = choose(preds, actual.reshape(shape), rule)
        scores = {m: float(np.mean(np.abs(actual[scored] - cells["mean", m][scored]))) for m in candidates}
        combined = np.asarray(sum(w * cells["mean", m] for m, w in weights.items()))
        errors = (actual - combined).reshape(shape)
        choice = label_of(label, weights)
        scores[choice] = float(np.mean(np.abs(errors[np.isfinite(errors)])))
        band_scores: dict[int, np.ndarray] = {}
        for level in levels:
            lo = sum(w * cells[f"lo-{level}", m] for m, w in weights.items())
            hi = sum(w * cells[f"hi-{level}", m] for m, w in weights.items())
            band_scores[level] = np.maximum(np.asarray(lo) - actual, actual - np.asarray(hi))[scored]
        plans[str(series_id)] = SeriesPlan(
            weights=weights,
            errors=errors,
            band_scores=band_scores,
            choice=choice,
            scores=scores,
            gamma=rule.gamma,
            member_scores=member_scores(every_window, list(weights), levels),
            member_halfwidths=member_halfwidths(every_window, [m for m in weights if m in slow], levels),
            windows=int(every_window.loc[every_window["model"].isin(list(weights)), "window"].nunique()),
        )
    return plans


def _record_levels(records: pd.DataFrame) -> list[int]:
    return sorted(int(c[3:]) for c in records.columns if c.startswith("lo-") and f"hi-{c[3:]}" in records.columns)


def combine(plan: SeriesPlan, members: Mapping[str, PointForecast], levels: tuple[int, ...]) -> PointForecast:
    """The served forecast of one series from its members' forecasts."""
    mean = np.asarray(sum(w * members[m][0] for m, w in plan.weights.items()), dtype=float)
    member_bands: Bands = {
        lvl: (
            np.asarray(sum(w * members[m][1][lvl][0] for m, w in plan.weights.items()), dtype=float),
            np.asarray(sum(w * members[m][1][lvl][1] for m, w in plan.weights.items()), dtype=float),
        )
        for lvl in levels
    }
    if plan.member_scores is not None:  # each member on its own errors (models.forecast.memberwise)
        # a state saved before member_halfwidths existed reads the class default, None: shifts as learnt
        halfwidths = plan.member_halfwidths
        calibrated = calibrate_members(plan.weights, members, plan.member_scores, levels, plan.gamma, halfwidths)
    else:
        calibrated = calibrate_pool(member_bands, plan.band_scores, levels, plan.gamma)
    # levels the backtest did not record: residual quantiles of the served mean, else the members' bands
    residual = residual_bands(mean, plan.errors, levels) if plan.errors is not None else None
    for lvl in levels:
        if lvl not in plan.band_scores and residual is not None:
            calibrated[lvl] = residual[lvl]
    return mean, calibrated


def _members_from_frame(forecast: pd.DataFrame, levels: tuple[int, ...]) -> dict[str, PointForecast]:
    out: dict[str, PointForecast] = {}
    for sid, g in forecast.groupby(ID, sort=False):
        bands = {lvl: (g[f"lo-{lvl}"].to_numpy(float), g[f"hi-{lvl}"].to_numpy(float)) for lvl in levels}
        out[str(sid)] = (g["mean"].to_numpy(float), bands)
    return out


@forecasters.register("auto")
class AutoForecaster(BaseForecaster):
    """Backtest-selected model or ensemble per series (see the module docstring)."""

    min_length: ClassVar[int] = 2

    def __init__(
        self,
        candidates: Sequence[str] = DEFAULT_CANDIDATES,
        windows: int = 3,
        step: int = 168,
        horizon: int = 168,
        ensemble_sizes: Sequence[int] = ENSEMBLE_SIZES,
        candidate_params: Mapping[str, Mapping[str, Any]] | None = None,
        pool: Sequence[str] = DEFAULT_RULE.pool,
        pool_weights: Sequence[float] | None = None,
        margin: float = DEFAULT_RULE.margin,
        gamma: float = DEFAULT_RULE.gamma,
        freq: str = "1h",
        seasonal_pool: Sequence[str] = DEFAULT_RULE.seasonal_pool,
        seasonal_weights: Sequence[float] | None = None,
        seasonal_from: float = DEFAULT_RULE.seasonal_from,
    ) -> None:
        self.candidates = candidates
        self.windows = windows
        self.step = step
        self.horizon = horizon
        self.ensemble_sizes = ensemble_sizes
        self.pool = pool
        self.pool_weights = pool_weights
        self.margin = margin
        self.gamma = gamma
        self.candidate_params = candidate_params
        self.freq = freq
        self.seasonal_pool = seasonal_pool
        self.seasonal_weights = seasonal_weights
        self.seasonal_from = seasonal_from

    def rule(self) -> SelectionRule:
        """The selection rule these parameters describe (a bad setting raises ``ForecastInputError``)."""
        for name, value in (("pool", self.pool), ("seasonal_pool", self.seasonal_pool)):
            if isinstance(value, str):
                raise ForecastInputError(f"auto: {name} is a list of forecaster names, not the string {value!r}")
        if not 0 <= float(self.seasonal_from) <= 1:
            raise ForecastInputError(
                f"auto: seasonal_from is a daily-cycle strength in [0, 1], not {self.seasonal_from}"
            )
        # a seasonal pool needs all its members among the candidates (else the plain pool serves every series)
        seasonal = tuple(self.seasonal_pool) if set(self.seasonal_pool) <= set(self.candidates) else ()
        default = (DEFAULT_RULE.seasonal_pool, DEFAULT_RULE.seasonal_weights)
        try:
            return SelectionRule(
                pool=tuple(self.pool),
                weights=self._pool_weights(),
                margin=float(self.margin),
                gamma=float(self.gamma),
                ensemble_sizes=tuple(self.ensemble_sizes),
                seasonal_pool=seasonal,
                seasonal_weights=_weights(self.seasonal_weights, seasonal, *default) if seasonal else (),
                seasonal_from=float(self.seasonal_from),
            )
        except ValueError as exc:  # the rule's own checks (weights per member): named for the user
            raise ForecastInputError(f"auto: {exc}") from exc

    def _pool_weights(self) -> tuple[float, ...]:
        """``pool_weights``, or by default the tuned weights of the default pool and equal weights otherwise."""
        return _weights(self.pool_weights, self.pool, DEFAULT_RULE.pool, DEFAULT_RULE.weights)

    def make_candidates(self) -> dict[str, BaseForecaster]:
        """The models to backtest: every candidate, or only the pool's when nothing can replace it."""
        params = self.candidate_params or {}
        names = list(self.candidates)
        members = [n for n in names if n in self.pool or n in self.seasonal_pool]
        if float(self.margin) >= 1 and len(members) >= 2:  # the pool is always served: only its members matter
            names = members
        made = {name: forecasters.create(name, freq=self.freq, **dict(params.get(name, {}))) for name in names}
        # a model that cannot forecast on this grid at all (level_profile on a grid that does not divide a day)
        return {name: model for name, model in made.items() if model.min_history() < sys.maxsize}

    def _fit_all(self, series: list[RegularSeries]) -> dict[str, Any]:
        models = self.make_candidates()
        slow = [name for name, model in models.items() if _slow(model)]
        spare = spare_workers(series) if slow else 0
        if not spare:
            return self._fit_with(models, series, slow, None)
        with Workers(spare) as workers:  # models.forecast.parallel: what runs beside the backtest's training
            return self._fit_with(models, series, slow, workers)

    def _fit_with(
        self, models: dict[str, BaseForecaster], series: list[RegularSeries], slow: list[str], workers: Workers | None
    ) -> dict[str, Any]:
        frame = to_frame(series)
        options: dict[str, Any] = {
            "horizon": self.horizon,
            "windows": self.windows,
            "step": self.step,
            "freq": self.freq,
            "level": CALIBRATED_LEVELS,
        }
        ahead: dict[str, Future[BaseForecaster]] = {}
        quick: Future[Any] | None = None
        if workers is not None:  # the served slow models and the fast members' backtest, started now
            for name in slow:
                if usable := _usable(models[name], series):
                    ahead[name] = workers.submit(fit_model, clone(models[name]), to_frame(usable))
            if fast := {name: model for name, model in models.items() if name not in slow}:
                quick = workers.submit(backtest_part, frame, fast, options)
        plans: dict[str, SeriesPlan] = {}
        skipped: list[str] = []
        rule = self.rule()  # before the try: a bad setting is an error, not "every series too short"
        try:
            # the slow members only at the newest origin, by a network trained there (models.forecast.memberwise)
            parts: list[BacktestResult | str] = []
            if slow:
                parts.append(backtest_part(frame, {n: models[n] for n in slow}, {**options, "windows": FRESH_WINDOWS}))
            if quick is not None:
                parts.append(quick.result())
            elif fast := {name: model for name, model in models.items() if name not in slow}:
                parts.append(backtest_part(frame, fast, options))
            result = merge_backtests(parts, list(models))
            seasonal = seasonal_ids(series, rule)
            plans = by_series(plan_from_records, result.records, workers, self.ensemble_sizes, rule, seasonal)
            skipped = result.skipped
        except ValueError as exc:  # every series too short to backtest: all fall back below
            skipped = [str(exc)]
        notes: dict[str, str] = {}
        for s in series:
            plan = plans.get(s.series_id)
            if plan is None:
                plans[s.series_id] = SeriesPlan(weights={FALLBACK: 1.0})
                notes[s.series_id] = (
                    f"only {len(s)} steps of history, too short to backtest a {self.horizon}-step horizon: "
                    f"serving {FALLBACK}"
                )
            else:
                considered = sorted(set(plan.scores) & set(models))
                used = max(plan.windows, plan.errors.shape[0] if plan.errors is not None else 0)
                if used < self.windows or len(considered) < len(models):
                    notes[s.series_id] = (
                        f"only {len(s)} steps of history: chose {plan.choice} among {', '.join(considered)} "
                        f"on {used} of {self.windows} backtest window(s)"
                    )
        needed = sorted({m for p in plans.values() for m in p.weights})
        self.members_ = {}
        for name in needed:
            if name in ahead:
                self.members_[name] = ahead[name].result()
                continue
            model = models.get(name) or forecasters.create(name, freq=self.freq)
            self.members_[name] = model.fit(to_frame(_usable(model, series)))
        self.notes_ = notes
        self.skipped_ = skipped
        self.choices_ = {sid: p.choice for sid, p in plans.items()}
        return dict(plans)

    def _update_all(self, series: list[RegularSeries]) -> dict[str, Any]:
        """Serving: members updated on the new window, fitted plans kept (see the module docstring)."""
        members: dict[str, BaseForecaster] = {}
        for name, model in self.members_.items():
            usable = [s for s in series if len(s) >= model.min_history()]
            if usable:
                members[name] = model._update_regular(usable)
        plans: dict[str, SeriesPlan] = {}
        notes: dict[str, str] = {}
        for s in series:
            sid = s.series_id
            serving = [name for name, model in members.items() if sid in model.states_]
            plan = self.states_.get(sid)
            if plan is not None and set(plan.weights) <= set(serving):
                plans[sid] = plan
                if sid in self.notes_:
                    notes[sid] = self.notes_[sid]
                continue
            pooled = [m for m in serving if m in self.pool] or serving
            if not pooled:  # every member needs more history: persistence needs no fitted parameters
                members.setdefault(FALLBACK, _parameter_free(FALLBACK, self.freq, series))
                pooled = [FALLBACK]
            in_pool = set(pooled) <= set(self.pool)
            weights = pool_weights(self.rule(), pooled) if in_pool else {m: 1 / len(pooled) for m in pooled}
            plans[sid] = SeriesPlan(weights=weights, choice="+".join(pooled), gamma=float(self.gamma))
            why = "not seen at fit time" if plan is None else f"{len(s)} steps are too few for {plan.choice}"
            notes[sid] = f"{why}: serving {plans[sid].choice} with its members' bands (uncalibrated)"
        self.members_ = members
        self.notes_ = notes
        self.choices_ = {sid: p.choice for sid, p in plans.items()}
        return dict(plans)

    def _predict_all(self, horizon: int, levels: tuple[int, ...]) -> dict[str, PointForecast]:
        member_points = {name: model._points(horizon, levels) for name, model in self.members_.items()}
        out: dict[str, PointForecast] = {}
        for sid, plan in self.states_.items():
            out[sid] = combine(plan, {m: member_points[m][sid] for m in plan.weights}, levels)
        return out


def _weights(
    given: Sequence[float] | None, pool: Sequence[str], default_pool: tuple[str, ...], default: tuple[float, ...]
) -> tuple[float, ...]:
    """Weights as given, else the tuned ones where the pool is the default pool, else equal (())."""
    if given is not None:
        return tuple(float(w) for w in given)
    return default if tuple(pool) == default_pool else ()


def _slow(model: BaseForecaster) -> bool:
    """A member auto backtests only at its newest origin(s) (``FRESH_WINDOWS``), trained there."""
    return bool(getattr(model, "backtest_frozen", False))


def _slow_name(name: str) -> bool:
    """Whether the registered forecaster ``name`` is a slow member (an unknown name is not)."""
    return name in forecasters and _slow(forecasters.create(name))


def _usable(model: BaseForecaster, series: list[RegularSeries]) -> list[RegularSeries]:
    """The series long enough for ``model``: what its served copy is fitted on."""
    return [s for s in series if len(s) >= model.min_history()]


def _parameter_free(name: str, freq: str, series: list[RegularSeries]) -> BaseForecaster:
    """A model without fitted parameters (a baseline) serving ``series``: its "fit" is only the window."""
    model: BaseForecaster = forecasters.create(name, freq=freq)
    model.states_ = {}  # fitted on nothing: there is nothing to fit
    return model._update_regular(series)
