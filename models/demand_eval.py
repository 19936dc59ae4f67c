"""Fit the demand regressors and judge them against the rules on later runs/days than they saw.

One place turns predictions (and rule outputs) into recommendations — whole GPUs or sharing slices,
never above the request or below what the run's first minutes already used, memory capped at the card —
and one place scores them, so the benchmark, the training pipeline and the tests compare like with like.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.metrics import mean_pinball_loss
from sklearn.utils.validation import check_is_fitted

from models.demand import DEFAULT_QUANTILE, DemandRegressor, metrics_table, provisioning_metrics, round_up_to_sizes
from models.demand_features import (
    EARLY_FEATURES,
    HISTORY_FEATURES,
    QUEUE_FEATURES,
    feature_matrix,
    queue_features,
    run_features,
)
from models.demand_queue import QUEUE_HORIZON_H, fit_queue_model, predict_queue_peaks

__all__ = [
    "RunDemandModel",
    "RunModels",
    "evaluate_queue",
    "evaluate_runs",
    "fit_run_models",
    "pinball_score",
    "quantile_curve",
    "recommend_from_fractions",
]


@dataclass
class RunModels:
    """The pair of per-run regressors (busy-GPU fraction, peak-memory fraction) and their feature list."""

    gpus: DemandRegressor
    mem: DemandRegressor
    columns: tuple[str, ...]

    def predict_fractions(self, features: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        X = feature_matrix(features, self.columns)
        return self.gpus.predict(X), self.mem.predict(X)


def fit_run_models(
    features: pd.DataFrame, *, quantile: float = DEFAULT_QUANTILE, with_early: bool = True, max_iter: int = 150
) -> RunModels:
    """Fit both per-run regressors on ``run_features`` rows."""
    columns = (*HISTORY_FEATURES, *EARLY_FEATURES) if with_early else HISTORY_FEATURES
    X = feature_matrix(features, columns)
    ok_g = np.isfinite(features["y_used_frac"].to_numpy())
    ok_m = np.isfinite(features["y_mem_frac"].to_numpy())
    gpus = DemandRegressor(quantile=quantile, max_iter=max_iter).fit(X[ok_g], features["y_used_frac"][ok_g])
    mem = DemandRegressor(quantile=quantile, max_iter=max_iter).fit(X[ok_m], features["y_mem_frac"][ok_m])
    return RunModels(gpus=gpus, mem=mem, columns=tuple(columns))


class RunDemandModel(BaseEstimator):  # type: ignore[misc]
    """The registered ``gpu-demand`` model: both per-run regressors behind one fit/predict on feature frames.

    ``fit`` takes ``run_features`` rows (with their ``y_*`` targets); ``predict`` returns a frame with
    ``used_frac`` and ``mem_frac`` at ``quantile`` — what the pyfunc serves for tabular input.
    ``fit_queues`` adds the per-queue peak regressor (``models.demand_queue``) that the scheduling loop
    serves: ``predict_queues`` turns each queue's hourly demand into its next ``queue_horizon_h_`` hours'
    peak at ``quantile``. A version registered before it existed has ``queue_model_ = None``.
    """

    queue_model_: DemandRegressor | None = None
    queue_horizon_h_: int = QUEUE_HORIZON_H

    def __init__(self, quantile: float = DEFAULT_QUANTILE, with_early: bool = True, max_iter: int = 150) -> None:
        self.quantile = quantile
        self.with_early = with_early
        self.max_iter = max_iter

    def fit(self, features: pd.DataFrame, y: object = None) -> RunDemandModel:
        self.models_ = fit_run_models(
            features, quantile=self.quantile, with_early=self.with_early, max_iter=self.max_iter
        )
        return self

    def predict(self, features: pd.DataFrame) -> pd.DataFrame:
        check_is_fitted(self)
        missing = [c for c in self.models_.columns if c not in features.columns]
        if missing:
            raise ValueError(f"demand model input lacks column(s) {', '.join(missing)}")
        used, mem = self.models_.predict_fractions(features)
        return pd.DataFrame({"used_frac": used, "mem_frac": mem}, index=features.index)

    def fit_queues(self, frame: pd.DataFrame, horizon_h: int = QUEUE_HORIZON_H) -> RunDemandModel:
        """Fit the queue-peak regressor on hourly ``series_id, timestamp, demand[, pending]`` rows."""
        self.queue_model_ = fit_queue_model(frame, quantile=self.quantile, horizon_h=horizon_h, max_iter=self.max_iter)
        self.queue_horizon_h_ = int(horizon_h)
        return self

    def predict_queues(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``series_id, timestamp, peak, now`` per queue with a week of history (``predict_queue_peaks``)."""
        if self.queue_model_ is None:
            raise ValueError(
                "this gpu-demand version has no queue-peak regressor (registered before it "
                "existed): retrain it with `predictor train demand`"
            )
        return predict_queue_peaks(self.queue_model_, frame)


def pinball_score(model: RunDemandModel, features: pd.DataFrame) -> float:
    """Mean pinball loss of both fractions at the model's quantile (lower is better; the promotion score)."""
    pred = model.predict(features)
    losses = []
    for target, column in (("y_used_frac", "used_frac"), ("y_mem_frac", "mem_frac")):
        y = features[target].to_numpy(np.float64)
        ok = np.isfinite(y)
        if ok.any():
            losses.append(mean_pinball_loss(y[ok], pred[column].to_numpy()[ok], alpha=model.quantile))
    return float(np.mean(losses)) if losses else float("nan")


def recommend_from_fractions(
    features: pd.DataFrame,
    used_frac: np.ndarray,
    mem_frac: np.ndarray,
    *,
    use_early: bool,
    sharing_sizes: Sequence[float] = (),
) -> tuple[np.ndarray, np.ndarray]:
    """(GPUs, GiB) per run from predicted fractions; NaN fractions (no history) keep the request/card.

    GPUs: rounded up (whole, or a sharing slice below one), at most the request, at least one slice (or
    one GPU) and, when the first minutes are known, at least what they already kept busy.
    """
    request = features["gpu_request"].to_numpy(np.float64)
    total_gib = features["gpu_mem_total_gib"].to_numpy(np.float64)
    gpus = np.where(np.isfinite(used_frac), used_frac * request, request)
    smallest = min((s for s in sharing_sizes if 0 < s < 1), default=1.0)
    floor = np.minimum(request, smallest)
    if use_early:
        early = features["early_used_frac"].to_numpy(np.float64) * request
        floor = np.maximum(floor, np.where(np.isfinite(early), early, 0.0))
    gpus = np.clip(round_up_to_sizes(np.maximum(gpus, floor), sharing_sizes), None, request)
    mem = np.where(np.isfinite(mem_frac), mem_frac * total_gib, total_gib)
    if use_early:
        early_mem = features["early_mem_frac"].to_numpy(np.float64) * total_gib
        mem = np.maximum(mem, np.where(np.isfinite(early_mem), early_mem, 0.0))
    mem = np.minimum(np.ceil(mem * 2) / 2, total_gib)  # half-GiB steps, never more than the card
    return gpus, mem


def _score(
    name: str,
    features: pd.DataFrame,
    runs: pd.DataFrame,
    gpus: np.ndarray,
    mem: np.ndarray,
    rows: dict[str, dict[str, float]],
) -> None:
    hours = runs["runtime_h"].to_numpy(np.float64)
    request = features["gpu_request"].to_numpy(np.float64)
    g = provisioning_metrics(features["y_used"].to_numpy(np.float64), gpus, hours, request)
    m = provisioning_metrics(runs["mem_peak_mib"].to_numpy(np.float64) / 1024, mem, hours)
    rows[name] = {
        "gpu_slack": g["slack"],
        "gpu_under": g["under"],
        "gpu_hours_freed": g["freed"],
        "mem_slack": m["slack"],
        "mem_under": m["under"],
        "runs": g["rows"],
    }


def evaluate_runs(
    runs: pd.DataFrame,
    split_at: pd.Timestamp,
    *,
    quantile: float = DEFAULT_QUANTILE,
    sharing_sizes: Sequence[float] = (),
    train_runs: pd.DataFrame | None = None,
    max_iter: int = 150,
    target: str = "busy",
) -> tuple[pd.DataFrame, dict[str, RunModels]]:
    """Metrics per method on runs starting at or after ``split_at``; models fit on runs ended before it.

    ``train_runs`` (default: ``runs``) lets a benchmark train on one simulated cluster and test on another.
    """
    feats = run_features(runs, target)
    train_src = runs if train_runs is None else train_runs
    train_feats = feats if train_runs is None else run_features(train_runs, target)
    train_mask = (train_src["end"] < split_at).to_numpy() if train_runs is None else np.ones(len(train_src), bool)
    test_mask = (runs["start"] >= split_at).to_numpy()
    if not train_mask.any() or not test_mask.any():
        raise ValueError(f"split {split_at} leaves no training or no test runs")
    test_f = feats[test_mask].reset_index(drop=True)
    test_r = runs[test_mask].reset_index(drop=True)
    request = test_f["gpu_request"].to_numpy(np.float64)
    total = test_f["gpu_mem_total_gib"].to_numpy(np.float64)
    rows: dict[str, dict[str, float]] = {}
    _score("request", test_f, test_r, request, total, rows)
    for rule in ("vpa", "krr"):
        gpus, mem = recommend_from_fractions(
            test_f,
            test_f[f"{rule}_used_frac"].to_numpy(),
            test_f[f"{rule}_mem_frac"].to_numpy(),
            use_early=False,
            sharing_sizes=sharing_sizes,
        )
        _score(f"{rule} (p90+15%)" if rule == "vpa" else f"{rule} (max+15%)", test_f, test_r, gpus, mem, rows)
    models: dict[str, RunModels] = {}
    for with_early, label in ((False, "gbr history"), (True, "gbr history+early")):
        fitted = fit_run_models(train_feats[train_mask], quantile=quantile, with_early=with_early, max_iter=max_iter)
        models[label] = fitted
        used, mem_frac = fitted.predict_fractions(test_f)
        gpus, mem = recommend_from_fractions(test_f, used, mem_frac, use_early=with_early, sharing_sizes=sharing_sizes)
        _score(f"{label} q{quantile:g}", test_f, test_r, gpus, mem, rows)
    return metrics_table(rows), models


def quantile_curve(
    runs: pd.DataFrame,
    split_at: pd.Timestamp,
    quantiles: Sequence[float] = (0.5, 0.8, 0.9, 0.95, 0.99),
    *,
    train_runs: pd.DataFrame | None = None,
    max_iter: int = 150,
    target: str = "busy",
    sharing_sizes: Sequence[float] = (),
) -> pd.DataFrame:
    """Slack and under-provisioning of the history+early regressor at each quantile."""
    rows = []
    for q in quantiles:
        table, _ = evaluate_runs(
            runs,
            split_at,
            quantile=q,
            train_runs=train_runs,
            max_iter=max_iter,
            target=target,
            sharing_sizes=sharing_sizes,
        )
        row = table[table["method"].str.startswith("gbr history+early")].iloc[0].to_dict()
        rows.append({"quantile": q, **{k: v for k, v in row.items() if k != "method"}})
    return pd.DataFrame(rows)


def evaluate_queue(
    frame: pd.DataFrame,
    split_at: pd.Timestamp,
    *,
    demand: str = "demand",
    arrivals: str | None = None,
    pending: str | None = None,
    quantile: float = DEFAULT_QUANTILE,
    max_iter: int = 150,
) -> tuple[pd.DataFrame, DemandRegressor]:
    """Next-24 h peak per queue: the regressor against "max of the last 24 h", on hours after ``split_at``.

    Training rows are those whose 24 h target window ends before ``split_at`` (no peeking).
    """
    f = queue_features(frame, demand=demand, arrivals=arrivals, pending=pending)
    stamps = pd.to_datetime(f["timestamp"])
    split = pd.Timestamp(split_at)
    if stamps.dt.tz is not None and split.tzinfo is None:
        split = split.tz_localize(stamps.dt.tz)
    train = (stamps + pd.Timedelta(hours=24) < split).to_numpy()
    test = (stamps >= split).to_numpy()
    if not train.any() or not test.any():
        raise ValueError(f"split {split_at} leaves no training or no test hours")
    model = DemandRegressor(quantile=quantile, max_iter=max_iter).fit(
        feature_matrix(f[train], QUEUE_FEATURES), f["y_ratio"][train]
    )
    t = f[test]
    pred = np.maximum(model.predict(feature_matrix(t, QUEUE_FEATURES)) * t["scale"].to_numpy(), 0.0)
    actual = t["target"].to_numpy(np.float64)
    rows = {
        "max of last 24 h": provisioning_metrics(actual, t["baseline_max24"].to_numpy(np.float64)),
        "max of last 24 h +15%": provisioning_metrics(actual, t["baseline_max24"].to_numpy(np.float64) * 1.15),
        f"gbr queue q{quantile:g}": provisioning_metrics(actual, pred),
    }
    table = metrics_table(rows).drop(columns=["freed"]).rename(columns={"rows": "hours"})
    return table, model
