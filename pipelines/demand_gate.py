"""The promotion gate for ``gpu-demand``: it scores the queue-peak regressor the scheduling loop serves.

A ``gpu-demand`` version holds two things: per-run regressors (``rightsize``) and the queue-peak regressor
the loop sizes queues with (``models.demand_queue``). The loop serves only the second, so the gate compares
that one when the challenger has it: the challenger's regressor is refitted on the queue hours before the
newest ``HOLDOUT_H`` hours of forecast origins, the champion's is taken as registered, and both are scored
(pinball loss at the model's quantile) on those origins. A champion without a queue regressor (a young
cluster had under eight days of history when it was trained) makes the loop report demand unknown, so the
first challenger that has one replaces it; a challenger without one never replaces a champion that has one.
Where neither has one, or the history is too short to hold out a window, the per-run regressors decide:
both as they would be served (the challenger fitted on every run, the champion as registered) on the
newest runs, so a retrain on unchanged runs ties with its champion instead of winning by the noise of a
smaller training set.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import mean_pinball_loss

from models.demand_eval import RunDemandModel, pinball_score
from models.demand_features import QUEUE_FEATURES, feature_matrix, queue_features
from models.demand_queue import fit_queue_model
from predictor.config import Settings
from predictor.registry import DEMAND_FAMILY, ChampionStore, Verdict, judge

__all__ = ["HOLDOUT_H", "demand_verdict", "queue_holdout"]

HOLDOUT_H = 24  # hours of forecast origins held out of the challenger's queue fit


def queue_holdout(
    hours: pd.DataFrame, *, horizon_h: int, holdout_h: int = HOLDOUT_H
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(hours before the window, feature rows of the window)``: no target scored reaches the fit's hours."""
    pending = "pending" if "pending" in hours.columns else None
    rows = queue_features(hours, pending=pending, horizon=horizon_h)
    if rows.empty:
        raise ValueError("no queue has enough hours to hold out a window")
    stamps = pd.to_datetime(rows["timestamp"], utc=True)
    cutoff = stamps.max() - pd.Timedelta(hours=holdout_h)
    before = hours.loc[pd.to_datetime(hours["timestamp"], utc=True) <= cutoff]
    return before.reset_index(drop=True), rows.loc[stamps > cutoff].reset_index(drop=True)


def _queue_pinball(model: Any, rows: pd.DataFrame, quantile: float) -> float:
    predicted = model.predict(feature_matrix(rows, QUEUE_FEATURES))
    return float(mean_pinball_loss(rows["y_ratio"].to_numpy(np.float64), predicted, alpha=quantile))


def _has_queue_model(estimator: Any) -> bool:
    return getattr(estimator, "queue_model_", None) is not None


def demand_verdict(
    settings: Settings,
    registry: ChampionStore,
    challenger: RunDemandModel,
    *,
    run_score: float,
    test_runs: pd.DataFrame,
    hours: pd.DataFrame,
    data_end: str,
) -> Verdict:
    """The one promotion policy for a fitted ``challenger`` (its queue regressor fitted if it could be)."""
    ours = _has_queue_model(challenger)

    def precheck(champion: Any) -> tuple[bool, str] | None:
        theirs = _has_queue_model(champion)
        if ours and not theirs:
            return (
                True,
                "the champion has no queue-peak regressor (the loop reports demand unknown) and this one has; promoted",
            )
        if theirs and not ours:
            return False, "this version has no queue-peak regressor and the champion has one; champion kept"
        return None

    score, rescore, metric, data = run_score, _run_rescore(test_runs), "backtest pinball", "the held-out runs"
    if ours:
        try:
            before, rows = queue_holdout(hours, horizon_h=challenger.queue_horizon_h_)
            refit = fit_queue_model(
                before,
                quantile=challenger.quantile,
                horizon_h=challenger.queue_horizon_h_,
                max_iter=challenger.max_iter,
            )
            score = _queue_pinball(refit, rows, challenger.quantile)
            rescore = _queue_rescore(rows, challenger.quantile)
            metric = "queue-peak pinball"
            data = f"the last {HOLDOUT_H} h of queue peaks (held out of the challenger's fit)"
        except ValueError as exc:  # too few hours for a window: the per-run regressors decide
            data += f" (no queue window: {exc})"
    mlflow = settings.mlflow
    return judge(
        registry,
        DEMAND_FAMILY,
        score,
        rescore,
        margin=mlflow.promotion_margin,
        tolerance=mlflow.promotion_tolerance,
        data_end=data_end,
        max_age_s=mlflow.max_champion_age_days * 86400,
        precheck=precheck,
        metric=metric,
        data=data + "; champion as registered",
        fmt=".5f",
    )


def _run_rescore(test_runs: pd.DataFrame) -> Callable[[Any], float]:
    return lambda champion: pinball_score(champion, test_runs)


def _queue_rescore(rows: pd.DataFrame, quantile: float) -> Callable[[Any], float]:
    def rescore(champion: Any) -> float:
        return _queue_pinball(champion.queue_model_, rows, quantile)

    return rescore
