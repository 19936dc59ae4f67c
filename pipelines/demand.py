"""The demand training job: run table → fit → backtest on later runs → MLflow run → promote if better.

Promotion follows the one policy of ``predictor.registry.promotion``, scored by ``pipelines.demand_gate``
on what the loop serves: the queue-peak regressor (pinball loss on the newest held-out hours, the champion
as registered), the per-run regressors only where no queue regressor can be compared. The
slack/under-provisioning table against the request, VPA and KRR rules is logged with it, so a reviewer
sees the trade-off, not only the loss.

The same version carries the per-queue peak regressor the scheduling loop serves (``models.demand_queue``),
fitted on the queues' hourly demand (the loop's own demand series when the caller has it, else the GPUs
requested by the runs active in each hour). With less than eight days of hours it is left out, and the
model card says so: the loop then reports demand as unknown rather than guessing.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from models.demand_eval import RunDemandModel, evaluate_runs, pinball_score
from models.demand_features import run_features
from models.demand_queue import QUEUE_HORIZON_H, queue_hours_from_runs
from pipelines.demand_gate import demand_verdict
from predictor.config import Settings
from predictor.errors import InputError, ModelError
from predictor.registry import DEMAND_FAMILY, ModelRegistry, git_revision, settle, verdict_tags

__all__ = ["DemandJob", "DemandOutcome", "split_time", "train_demand"]


@dataclass(frozen=True)
class DemandJob:
    """What to train: the quantile, whether the first minutes are features, and the held-out share."""

    quantile: float = 0.95
    with_early: bool = True
    test_fraction: float = 0.3
    max_iter: int = 150
    target: str = "busy"


@dataclass
class DemandOutcome:
    version: str
    promoted: bool
    score: float
    champion_score: float | None
    reason: str
    table: pd.DataFrame
    metrics: dict[str, float] = field(default_factory=dict)
    queue_model: str = ""  # what the queue-peak regressor was fitted on, or why there is none


def split_time(runs: pd.DataFrame, test_fraction: float) -> pd.Timestamp:
    """The start time after which the last ``test_fraction`` of runs fall (the backtest window)."""
    if runs.empty:
        raise InputError("no runs to train on: the history holds no GPU held by a pod")
    return pd.Timestamp(runs["start"].quantile(1 - test_fraction))  # type: ignore[arg-type]


def train_demand(
    settings: Settings,
    runs: pd.DataFrame,
    job: DemandJob = DemandJob(),
    *,
    registry: ModelRegistry | None = None,
    queues: pd.DataFrame | None = None,
) -> DemandOutcome:
    """Fit, backtest, log and register one ``gpu-demand`` version; promote it if the gate says so (module docstring).

    ``queues``: hourly ``series_id, timestamp, demand[, pending]`` per queue for the queue-peak regressor
    (default: derived from ``runs``).
    """
    registry = registry or ModelRegistry(settings.mlflow)
    split = split_time(runs, job.test_fraction)
    try:
        table, _ = evaluate_runs(runs, split, quantile=job.quantile, max_iter=job.max_iter, target=job.target)
    except ValueError as exc:
        raise ModelError(f"cannot backtest {DEMAND_FAMILY} on {len(runs)} runs: {exc}") from exc
    feats = run_features(runs, job.target)
    train = (runs["end"] < split).to_numpy()
    test = (runs["start"] >= split).to_numpy()
    estimator = RunDemandModel(quantile=job.quantile, with_early=job.with_early, max_iter=job.max_iter)
    score = pinball_score(estimator.fit(feats[train]), feats[test])
    estimator.fit(feats)  # the served model sees every run
    hours = queue_hours_from_runs(runs) if queues is None else queues
    source = "runs active per hour" if queues is None else "queue demand series"
    try:
        estimator.fit_queues(hours, horizon_h=QUEUE_HORIZON_H)
        queue_note = (
            f"next-{QUEUE_HORIZON_H} h peak per queue, fitted on {source} ({hours['series_id'].nunique()} queues)"
        )
    except ValueError as exc:
        queue_note = f"none: {exc}"
    data_end = runs["end"].max().isoformat()
    verdict = demand_verdict(
        settings,
        registry,
        estimator,
        run_score=pinball_score(estimator, feats[test]),  # as it would be served: fitted on every run
        test_runs=feats[test],
        hours=hours,
        data_end=data_end,
    )
    chosen = table[table["method"].str.startswith("gbr history+early" if job.with_early else "gbr history q")]
    metrics = {"backtest_pinball": score}
    for column in ("gpu_slack", "gpu_under", "gpu_hours_freed", "mem_slack", "mem_under"):
        metrics[f"backtest_{column}"] = float(chosen[column].iloc[0])
    if verdict.score is not None:
        metrics["promotion_score"] = verdict.score
    if verdict.rescored_score is not None:
        metrics["champion_promotion_score"] = verdict.rescored_score
    params = {
        "quantile": job.quantile,
        "with_early": job.with_early,
        "target": job.target,
        "max_iter": job.max_iter,
        "split": split.isoformat(),
        "runs": len(runs),
        "train_runs": int(train.sum()),
        "test_runs": int(test.sum()),
        "data_start": runs["start"].min().isoformat(),
        "data_end": data_end,
        "queue_model": queue_note[:250],
    }
    card = (
        f"# {DEMAND_FAMILY}\n\nPer-run busy-GPU and peak-memory fractions at quantile {job.quantile}.\n"
        f"Backtest: trained on runs ended before {split}, tested on {int(test.sum())} later runs.\n"
        f"Queue-peak regressor (served by the scheduling loop): {queue_note}.\n"
        f"Promotion: {verdict.reason}.\n\n```\n{table.to_string(index=False)}\n```\n"
    )
    with tempfile.TemporaryDirectory(prefix="gpu-demand-") as tmp:
        table_csv = Path(tmp) / "backtest_methods.csv"
        table.to_csv(table_csv, index=False)
        info = registry.log_model(
            DEMAND_FAMILY,
            estimator,
            kind="tabular",
            params=params,
            metrics=metrics,
            tags={"git_revision": git_revision(), **verdict_tags(verdict)},
            artifacts=[table_csv],
            texts={"model_card.md": card},
            pip_requirements=("pandas", "numpy", "scikit-learn"),
        )
    promoted = settle(registry, DEMAND_FAMILY, info.version, verdict)
    return DemandOutcome(
        info.version, promoted, score, verdict.champion_score, verdict.reason, table, metrics, queue_note
    )
