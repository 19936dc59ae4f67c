"""GPU-demand regressors, the rules they must beat, and the slack/under-provisioning yardstick.

A request is a guess made once; right-sizing replaces it with what similar runs really used, at a chosen
quantile so that the rare big run is still covered. The estimator is a gradient-boosted quantile
regressor that looks like any scikit-learn regressor (``parametrize_with_checks`` passes), so ``clone``,
grid search and the registry's state format need no special cases; the features that make it useful are built in
``models.demand_features``. The baselines are the rules platform teams already run (the request itself,
VPA's p90 + 15 %, KRR's max + 15 %, "max of the last 24 h" for queues), computed on the same rows, and
every method is judged by one function so the comparison cannot drift.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import threadpool_limits

__all__ = [
    "DEFAULT_QUANTILE",
    "HEADROOM",
    "DemandRegressor",
    "krr_rule",
    "provisioning_metrics",
    "round_up_to_sizes",
    "vpa_rule",
]

DEFAULT_QUANTILE = 0.95
HEADROOM = 0.15  # VPA's and KRR's default margin over the observed percentile


class DemandRegressor(RegressorMixin, BaseEstimator):  # type: ignore[misc]
    """Gradient-boosted quantile regression: predicts the ``quantile`` of the target given features.

    Used for a run's busy-GPU fraction, its peak GPU-memory fraction and a queue's next-24 h peak (all
    targets are built scale-free by ``models.demand_features``). NaN features are allowed: a run with
    no history in its group has NaN history features, and the trees route them explicitly.
    """

    def __init__(
        self,
        quantile: float = DEFAULT_QUANTILE,
        max_iter: int = 150,
        learning_rate: float = 0.08,
        max_leaf_nodes: int = 15,
        min_samples_leaf: int = 20,
        l2_regularization: float = 0.0,
        random_state: int | None = 0,
        n_threads: int | None = 1,
    ) -> None:
        self.quantile = quantile
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf
        self.l2_regularization = l2_regularization
        self.random_state = random_state
        self.n_threads = n_threads

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        # R² judges the conditional mean; a high quantile sits above it by design and scores poorly.
        tags.regressor_tags.poor_score = abs(float(self.quantile) - 0.5) > 0.2
        return tags

    def fit(self, X: Any, y: Any) -> DemandRegressor:
        if not 0.0 < float(self.quantile) < 1.0:
            raise ValueError(f"quantile must be in (0, 1), got {self.quantile!r}")
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", y_numeric=True, dtype="numeric")
        # A feature with no value at all in training (e.g. no workload ever ran twice) carries nothing, and
        # the binner fails on it: it is held constant, in fit and in predict alike.
        self.empty_features_ = np.all(np.isnan(X), axis=0)
        X = self._fill_empty(X)
        model = HistGradientBoostingRegressor(
            loss="quantile",
            quantile=float(self.quantile),
            max_iter=self.max_iter,
            learning_rate=self.learning_rate,
            max_leaf_nodes=self.max_leaf_nodes,
            min_samples_leaf=self.min_samples_leaf,
            l2_regularization=self.l2_regularization,
            early_stopping=False,  # a quantile's validation loss is noisy on small groups; fixed rounds
            random_state=self.random_state,
        )
        # OpenMP's default (one thread per core) collapses when the cores are shared: on a loaded 2-core
        # machine a 400-row fit took 40 s with all threads and 0.6 s with one. Small tables need one.
        with threadpool_limits(limits=self.n_threads, user_api="openmp"):
            self.model_ = model.fit(X, np.asarray(y, dtype=np.float64))
        self.n_iter_ = int(self.model_.n_iter_)
        return self

    def predict(self, X: Any) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype="numeric")
        X = self._fill_empty(X)
        with threadpool_limits(limits=self.n_threads, user_api="openmp"):
            return np.asarray(self.model_.predict(X), dtype=np.float64)

    def _fill_empty(self, X: np.ndarray) -> np.ndarray:
        if not self.empty_features_.any():
            return X
        X = np.array(X, dtype=np.float64, copy=True)
        X[:, self.empty_features_] = 0.0
        return X


# ---------------------------------------------------------------------------------------------- rules
def vpa_rule(history: Sequence[float] | np.ndarray, headroom: float = HEADROOM) -> float:
    """VPA's target: the 90th percentile of observed use plus a safety margin (NaN with no history)."""
    values = np.asarray(history, dtype=np.float64)
    values = values[np.isfinite(values)]
    return float(np.percentile(values, 90) * (1 + headroom)) if values.size else float("nan")


def krr_rule(history: Sequence[float] | np.ndarray, headroom: float = HEADROOM) -> float:
    """KRR's simple strategy for memory-like resources: the maximum seen plus a margin."""
    values = np.asarray(history, dtype=np.float64)
    values = values[np.isfinite(values)]
    return float(values.max() * (1 + headroom)) if values.size else float("nan")


def round_up_to_sizes(values: np.ndarray, sizes: Sequence[float] = ()) -> np.ndarray:
    """Round GPU amounts up to whole GPUs, or to the fractional slices a sharing setup offers below one.

    ``sizes`` are the fractions a GPU-sharing setup can hand out (e.g. 0.25, 0.5 for time-slicing or MIG
    slices); amounts above 1 always round up to whole GPUs, since slices do not span GPUs.
    """
    values = np.asarray(values, dtype=np.float64)
    out = np.ceil(values - 1e-9)
    fractions = sorted(s for s in sizes if 0 < s < 1)
    if fractions:
        small = values <= 1
        grid = np.array([*fractions, 1.0])
        idx = np.searchsorted(grid, values[small] - 1e-9, side="left")
        out[small] = grid[np.minimum(idx, len(grid) - 1)]
    return np.asarray(np.maximum(out, 0.0), dtype=np.float64)


# ---------------------------------------------------------------------------------------------- metrics
def provisioning_metrics(
    used: np.ndarray,
    recommended: np.ndarray,
    hours: np.ndarray | None = None,
    request: np.ndarray | None = None,
) -> dict[str, float]:
    """How a recommendation would have fared on what really happened.

    ``slack`` = 1 − Σ used·h / Σ recommended·h (share of provisioned capacity left idle), ``under`` =
    share of rows whose use exceeded the recommendation, ``freed`` = Σ (request − recommended)·h (for
    GPUs: GPU-hours handed back), NaN without a request.
    """
    used = np.asarray(used, dtype=np.float64)
    rec = np.asarray(recommended, dtype=np.float64)
    h = np.ones_like(used) if hours is None else np.asarray(hours, dtype=np.float64)
    ok = np.isfinite(used) & np.isfinite(rec) & np.isfinite(h)
    used, rec, h = used[ok], rec[ok], h[ok]
    provisioned = float(np.sum(rec * h))
    slack = 1.0 - float(np.sum(used * h)) / provisioned if provisioned > 0 else float("nan")
    under = float(np.mean(used > rec + 1e-9)) if used.size else float("nan")
    freed = float("nan")
    if request is not None:
        req = np.asarray(request, dtype=np.float64)[ok]
        freed = float(np.sum((req - rec) * h))
    return {"slack": slack, "under": under, "freed": freed, "rows": float(used.size)}


def metrics_table(rows: dict[str, dict[str, float]]) -> pd.DataFrame:
    """``{method: metrics}`` as a frame, one row per method, in insertion order."""
    return pd.DataFrame([{"method": name, **values} for name, values in rows.items()])
