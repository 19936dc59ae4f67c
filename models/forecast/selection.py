"""How ``auto`` turns a few backtest windows into what it serves: a regularised choice, then calibration.

Why regularised: picking the per-series winner among many options on three or four windows of one trace
overfits (on an unseen public trace the old ``auto`` lost 2 % to a plain mean of the last week). So the
default served forecast is a *pool*, a fixed weighted mean of members that fail differently; a single
model or a backtest-weighted ensemble replaces it only when its backtest loss beats the pool's by
``margin`` on at least ``min_windows`` windows. Where fewer than two pool members can run on a series
there is no pool, and the lowest-loss option is served; where some can, their weights are renormalised.
The loss is MAE, or with ``loss="median"`` the median over windows of the per-window MAE, so one drained
or shifted window cannot decide on its own.

The default was chosen by ``bench/forecast.py`` (Philly, Alibaba and simulated queues with shifts and
drains; every model backtested at every origin): the rule with the lowest worst-trace MAE ratio to the
best baseline, over pools of window means, ETS, MSTL, drift and persistence, LSTM-led weighted pools, and
per-series choices at margins 0–20 %. Left out one trace at a time, the rule tuned on the other two was
always an LSTM-led pool served as is (``margin`` 1): 80 % LSTM shrunk toward persistence and drift (or
damped trend), which held 7–10 % under the best baseline on every held-out trace, while every per-series
choice and every pool without the LSTM lost on at least one. Tuned on all three it is
``lstm 0.8, naive 0.1, drift 0.1``: the LSTM carries the daily shape and drains, persistence and drift
pull the level toward the last hour and the recent trend where the LSTM's week-long prior lags a shift.

A series whose daily cycle is strong (``models.forecast.decomposition.daily_strength`` ≥ ``seasonal_from``
over its last 14 days) is served the *seasonal pool* instead: by default LSTM 0.3 + ``level_profile`` 0.7
where the strength is at least 0.15. Why a gate and not one pool: the public traces have almost
no daily cycle (strength 0.03 and 0.05 at the median) and the simulated queues a strong one (0.32–0.45), and the
rule that wins on one kind loses badly on the other (``level_profile`` alone is 2.2× the best baseline's MAE
on Alibaba; the LSTM-led pool 10 % over it on the seasonal simulated queues). The gate is one scale-free
number per series, and its threshold and the seasonal pool's weights are tuned like the rest: leave one
trace out, the pair chosen on the other four puts every held-out trace at least 5 % under its best baseline
(docs/design.md, "A seasonal pool behind a daily-cycle gate").

Calibration is two-sided conformal (CQR): the served bands move out *or in* by the quantile of their
backtest nonconformity scores. Backtest windows overlap in time and are not exchangeable with the future
(a level shift lands in one window or none), so the quantile is taken at miscoverage ``(1 - L) · gamma``
instead of ``1 - L``, with ``gamma`` tuned on held-out traces (> 1 narrows, < 1 widens). Tuned on all three
traces it is 1 (plain two-sided CQR); held-out coverage still misses 0.78–0.82 on some traces (the
benchmark prints it): the traces disagree on how wide is right.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

__all__ = ["DEFAULT_RULE", "SelectionRule", "choose", "cqr_shift", "label_of", "option_weights", "pool_weights"]


@dataclass(frozen=True)
class SelectionRule:
    """The few numbers the choice depends on (all tuned leave-one-trace-out; see the module docstring)."""

    pool: tuple[str, ...] = ("naive", "lstm")
    weights: tuple[float, ...] = ()  # the pool members' weights, aligned with ``pool``; (): equal
    margin: float = 1.0
    min_windows: int = 1
    loss: str = "mae"
    ensemble_sizes: tuple[int, ...] = (2, 3, 4, 5)
    gamma: float = 1.0
    # where a series' daily cycle is at least this strong (models.forecast.decomposition.daily_strength) the
    # seasonal pool replaces the pool; no seasonal pool: never
    seasonal_pool: tuple[str, ...] = ()
    seasonal_weights: tuple[float, ...] = ()
    seasonal_from: float = 1.0

    def __post_init__(self) -> None:
        for pool, weights in ((self.pool, self.weights), (self.seasonal_pool, self.seasonal_weights)):
            if weights and (len(weights) != len(pool) or min(weights) < 0 or sum(weights) <= 0):
                raise ValueError(
                    f"pool weights {weights} must be one non-negative number per pool member {pool}, not all zero"
                )
        if self.seasonal_pool and not 0 <= self.seasonal_from <= 1:
            raise ValueError(f"seasonal_from is a daily-cycle strength in [0, 1], not {self.seasonal_from}")

    def for_strength(self, strength: float) -> SelectionRule:
        """The rule for a series whose daily cycle has this strength (NaN: unknown, so the plain pool)."""
        if self.seasonal_pool and np.isfinite(strength) and strength >= self.seasonal_from:
            return replace(
                self, pool=self.seasonal_pool, weights=self.seasonal_weights, seasonal_pool=(), seasonal_weights=()
            )
        return self


# tuned by bench/forecast.py: the pool on three traces first, the seasonal pool and its gate on all five
DEFAULT_RULE = SelectionRule(
    pool=("lstm", "naive", "drift"),
    weights=(0.8, 0.1, 0.1),
    seasonal_pool=("lstm", "level_profile"),
    seasonal_weights=(0.3, 0.7),
    seasonal_from=0.15,
)
FALLBACK = "naive"


def _loss(actual: np.ndarray, pred: np.ndarray, kind: str) -> float:
    """``actual``, ``pred``: (windows, horizon); NaN actuals are not scored."""
    err = np.abs(actual - pred)
    if kind == "median":
        per_window = [float(np.mean(e[np.isfinite(e)])) for e in err if np.isfinite(e).any()]
        return float(np.median(per_window)) if per_window else float("nan")
    finite = np.isfinite(err)
    return float(np.mean(err[finite])) if finite.any() else float("nan")


def pool_weights(rule: SelectionRule, present: list[str]) -> dict[str, float]:
    """The pool's weights over the members that could run on this series, renormalised to sum to 1."""
    given = dict(zip(rule.pool, rule.weights, strict=True)) if rule.weights else dict.fromkeys(rule.pool, 1.0)
    total = sum(given[m] for m in present)
    if total <= 0:
        return dict.fromkeys(present, 1 / len(present))
    return {m: given[m] / total for m in present}


def option_weights(
    preds: Mapping[str, np.ndarray], actual: np.ndarray, rule: SelectionRule
) -> list[tuple[str, dict[str, float], float]]:
    """Every option with its label, member weights and backtest loss: the pool, singles, ensembles."""
    models = sorted(preds)
    scores = {m: _loss(actual, preds[m], rule.loss) for m in models}
    usable = [m for m in models if np.isfinite(scores[m])]
    options: list[tuple[str, dict[str, float]]] = []
    pool = [m for m in rule.pool if m in preds]
    if len(pool) >= 2:  # one member is no combination: then every option competes on its loss alone
        options.append(("pool", pool_weights(rule, pool)))
    ranked = sorted(usable, key=lambda m: (scores[m], m))
    options += [(m, {m: 1.0}) for m in ranked]
    for k in rule.ensemble_sizes:
        top = ranked[:k]
        if len(top) == k and all(scores[m] > 0 for m in top):
            inverse = np.array([1 / scores[m] for m in top])
            options.append((f"top{k}", dict(zip(top, (inverse / inverse.sum()).tolist(), strict=True))))
    out = []
    for label, weights in options:
        combined = sum(w * preds[m] for m, w in weights.items())
        out.append((label, weights, _loss(actual, np.asarray(combined), rule.loss)))
    return out


def choose(preds: Mapping[str, np.ndarray], actual: np.ndarray, rule: SelectionRule) -> tuple[str, dict[str, float]]:
    """The served option: the pool unless another beats it by ``margin`` on ≥ ``min_windows`` windows."""
    scored_windows = int(np.isfinite(actual).any(axis=1).sum()) if actual.size else 0
    options = option_weights(preds, actual, rule)
    if not options:
        return FALLBACK, {FALLBACK: 1.0}
    if options[0][0] != "pool":  # no pool member can run on this series: plain lowest loss
        label, weights, _ = min(options, key=lambda o: o[2] if np.isfinite(o[2]) else np.inf)
        return label, weights
    pool_label, pool_weights, pool_loss = options[0]
    if scored_windows < rule.min_windows or not np.isfinite(pool_loss):
        return pool_label, pool_weights
    label, weights, loss = min(options[1:], key=lambda o: o[2] if np.isfinite(o[2]) else np.inf, default=options[0])
    if np.isfinite(loss) and loss < (1 - rule.margin) * pool_loss:
        return label, weights
    return pool_label, pool_weights


def cqr_shift(scores: np.ndarray, level: int, gamma: float) -> float | None:
    """How far to move a band out (positive) or in (negative); None when the evidence is too thin."""
    scores = scores[np.isfinite(scores)]
    if scores.size < 20:
        return None
    alpha = (1 - level / 100) * gamma
    prob = min(1.0, (1 - alpha) * (1 + 1 / scores.size))
    return float(np.quantile(scores, prob))


def label_of(choice: str, weights: Mapping[str, float]) -> str:
    """Human-readable name of what is served (``pool(naive, ets)``, ``ets``, ``ensemble(...)``)."""
    if len(weights) == 1:
        return next(iter(weights))
    kind = "pool" if choice == "pool" else "ensemble"
    return f"{kind}(" + ", ".join(f"{m} {w:.2f}" for m, w in weights.items()) + ")"
