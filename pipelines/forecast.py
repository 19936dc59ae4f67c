"""The forecast training job: history → fit → rolling backtest → MLflow run → promote if better.

Also the plain ``forecast`` and ``backtest`` operations the CLI exposes, so that the CLI stays thin and
the same code paths run in a CronJob, a notebook and the tests. History comes from a file or from
Prometheus (``pipelines.forecast_history``, whose names this module re-exports). The rolling backtest
scores the configuration (logged with the run); promotion compares models (``pipelines.holdout``): the
challenger fitted without the newest ``horizon`` steps and the champion as registered, updated with the
same history, are both scored on those steps, and the one policy of ``predictor.registry.promotion`` decides.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone

from models.forecast import (
    AutoForecaster,
    BaseForecaster,
    ForecastInputError,
    UnknownForecasterError,
    forecasters,
    records_for_auto,
    run_backtest,
    score_records,
    serving_params,
    summarize,
)
from models.forecast.chunked import DEFAULT_CHUNK_SIZE
from models.frames import ID, TIME
from pipelines.forecast_fanout import FannedOut, fit_and_backtest
from pipelines.forecast_history import DEFAULT_QUERIES, load_prometheus_history
from pipelines.forecast_plots import forecast_plots
from pipelines.holdout import holdout_mase, split_last
from predictor.bounds import check_horizon
from predictor.config import Settings
from predictor.errors import InputError, ModelError
from predictor.registry import (
    FORECAST_FAMILY,
    ModelRegistry,
    ModelVersionInfo,
    Verdict,
    git_revision,
    judge,
    settle,
    verdict_tags,
)

__all__ = [
    "DEFAULT_QUERIES",
    "ForecastJob",
    "ForecastOutcome",
    "TrainOutcome",
    "backtest_table",
    "evaluate",
    "load_prometheus_history",
    "make_model",
    "run_forecast",
    "train_forecast",
]


@dataclass(frozen=True)
class ForecastJob:
    """What to train and how to judge it."""

    model: str = "auto"
    horizon: int = 168
    windows: int = 4
    step: int | None = None  # defaults to the horizon (non-overlapping weekly origins)
    levels: tuple[int, ...] = (80, 95)
    freq: str = "1h"
    model_params: Mapping[str, Any] = field(default_factory=dict)
    chunk_size: int = DEFAULT_CHUNK_SIZE  # series per training task (pipelines.forecast_fanout)

    @property
    def origin_step(self) -> int:
        return int(self.step or self.horizon)


@dataclass
class ForecastOutcome:
    forecast: pd.DataFrame
    notes: list[str]


@dataclass
class TrainOutcome:
    estimator: BaseForecaster
    version: str
    promoted: bool
    score: float
    champion_score: float | None
    metrics: dict[str, float]
    per_series: pd.DataFrame
    reason: str
    holdout_score: float | None = None  # the score the promotion gate compared (``pipelines.holdout``)


def make_model(name: str, *, horizon: int, freq: str = "1h", params: Mapping[str, Any] | None = None) -> BaseForecaster:
    """A forecaster by registered name, told the horizon it will serve."""
    try:
        model: BaseForecaster = forecasters.create(name, freq=freq, **serving_params(name, horizon, params or {}))
    except UnknownForecasterError as exc:
        raise InputError(str(exc)) from exc
    except TypeError as exc:
        raise InputError(f"bad parameters for model {name!r}: {exc}") from exc
    return model


def _model_error(exc: ValueError) -> InputError | ModelError:
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return InputError(message) if isinstance(exc, ForecastInputError) else ModelError(message)


def run_forecast(
    history: pd.DataFrame,
    *,
    model: str = "auto",
    horizon: int = 168,
    levels: Iterable[int] = (80, 95),
    freq: str = "1h",
) -> ForecastOutcome:
    """Fit ``model`` on ``history`` and forecast ``horizon`` steps for every series."""
    check_horizon(horizon, "--horizon", last=_last_time(history), step=freq)
    estimator = make_model(model, horizon=horizon, freq=freq)
    try:
        forecast = estimator.fit(history).predict(horizon, level=tuple(levels))
    except ValueError as exc:
        raise _model_error(exc) from exc
    notes = [f"{sid}: {note}" for sid, note in getattr(estimator, "notes_", {}).items()]
    if isinstance(estimator, AutoForecaster):
        notes += [f"{sid}: auto serves {choice}" for sid, choice in estimator.choices_.items()]
    return ForecastOutcome(forecast=forecast, notes=notes)


def _last_time(history: pd.DataFrame) -> pd.Timestamp | None:
    """The latest timestamp of ``history``: forecasts start one step after it."""
    return None if history.empty else pd.Timestamp(history[TIME].max())


def evaluate(
    estimator: BaseForecaster, history: pd.DataFrame, *, horizon: int, windows: int, step: int, name: str = "model"
) -> pd.DataFrame:
    """Per-(series, window) backtest metrics of one estimator configuration.

    ``auto`` is scored by replaying its selection on a backtest of its candidates over ``windows`` plus
    its own inner windows (exactly what refitting it at every origin would do when ``step == horizon``).
    """
    try:
        if isinstance(estimator, AutoForecaster) and step == horizon == estimator.horizon == estimator.step:
            result = run_backtest(
                history,
                estimator.make_candidates(),
                horizon=horizon,
                windows=windows + int(estimator.windows),
                step=step,
                freq=estimator.freq,
            )
            records = records_for_auto(
                result,
                windows,
                int(estimator.windows),
                estimator.ensemble_sizes,
                estimator.rule(),
                history=history,
                freq=estimator.freq,
            )
            records = records.assign(model=name)
        else:
            result = run_backtest(
                history, {name: estimator}, horizon=horizon, windows=windows, step=step, freq=estimator.freq
            )
            records = result.records
    except ValueError as exc:
        raise _model_error(exc) from exc
    if records.empty:
        raise ModelError("the backtest scored nothing: the history is too short for its windows")
    return score_records(records, result.scales, result.levels)


def backtest_table(
    history: pd.DataFrame,
    *,
    models: Sequence[str] | None = None,
    horizon: int = 168,
    windows: int = 4,
    step: int | None = None,
    freq: str = "1h",
) -> pd.DataFrame:
    """Metrics per series and model, averaged over the backtest windows (the ``backtest`` command).

    ``models`` defaults to every registered forecaster, each once (aliases such as ``seasonal_naive`` skipped).
    """
    check_horizon(horizon, "--horizon")
    step = step or horizon
    parts = []
    for name in forecasters.names(aliases=False) if models is None else models:
        model = make_model(name, horizon=horizon, freq=freq)
        parts.append(evaluate(model, history, horizon=horizon, windows=windows, step=step, name=name))
    return summarize(pd.concat(parts, ignore_index=True))


def _score(per_window: pd.DataFrame) -> float:
    """Promotion score: mean over series of the window-averaged MASE (lower is better)."""
    per_series = per_window.groupby(ID)["mase"].mean()
    return float(per_series.mean()) if per_series.notna().any() else float(per_window["mae"].mean())


def _fanned(
    estimator: BaseForecaster, history: pd.DataFrame, job: ForecastJob, *, name: str | None = None, fit: bool = True
) -> FannedOut:
    """Backtest (and fit) chunk by chunk on the command's executor (``pipelines.fanout``)."""
    return fit_and_backtest(
        estimator,
        history,
        horizon=job.horizon,
        windows=job.windows,
        step=job.origin_step,
        levels=job.levels,
        name=name or job.model,
        chunk_size=job.chunk_size,
        fit=fit,
        backtest=evaluate,
        fit_final=_fit_final_model,
    )


def _backtest(
    estimator: BaseForecaster, history: pd.DataFrame, job: ForecastJob, name: str | None = None
) -> tuple[pd.DataFrame, float]:
    """Per-window metrics over the job's rolling origins, and the promotion score they give."""
    per_window = _fanned(estimator, history, job, name=name, fit=False).per_window
    return per_window, _score(per_window)


def _fit_final_model(
    estimator: BaseForecaster, history: pd.DataFrame, horizon: int, levels: tuple[int, ...]
) -> tuple[BaseForecaster, pd.DataFrame]:
    """Fit the version to register on all of the history; its forecast is what the fan chart shows."""
    try:
        forecast: pd.DataFrame = estimator.fit(history).predict(horizon, level=levels)
    except ValueError as exc:
        raise _model_error(exc) from exc
    return estimator, forecast


def _compare_with_champion(
    settings: Settings, registry: ModelRegistry, history: pd.DataFrame, job: ForecastJob, template: BaseForecaster
) -> Verdict:
    """The shared promotion policy on the newest ``horizon`` steps (``pipelines.holdout``): the challenger
    fitted on the history before them, the champion as registered, updated with that history."""
    before, window = split_last(history, job.horizon, job.freq)
    _, ours = _fit_final_model(clone(template), before, job.horizon, job.levels)
    score = holdout_mase(ours, before, window)

    def rescore(champion: BaseForecaster) -> float:
        theirs = _predict_updated(champion, before, job.horizon, job.levels)
        return holdout_mase(theirs, before, window)

    mlflow = settings.mlflow
    return judge(
        registry,
        FORECAST_FAMILY,
        score,
        rescore,
        margin=mlflow.promotion_margin,
        tolerance=mlflow.promotion_tolerance,
        data_end=pd.Timestamp(history[TIME].max()).isoformat(),
        max_age_s=mlflow.max_champion_age_days * 86400,
        metric="holdout MASE",
        data=f"the last {job.horizon} steps (held out of the challenger's fit; champion as registered)",
    )


def _predict_updated(
    champion: BaseForecaster, history: pd.DataFrame, horizon: int, levels: tuple[int, ...]
) -> pd.DataFrame:
    """The champion's forecast as the loop serves it: its stored state updated with ``history``, not refitted."""
    try:
        forecast: pd.DataFrame = champion.update(history).predict(horizon, level=levels)
    except (ValueError, ArithmeticError) as exc:
        raise ModelError(f"the champion cannot forecast from this history: {exc}".splitlines()[0]) from exc
    return forecast


def _run_metrics(per_window: pd.DataFrame, score: float, verdict: Verdict) -> dict[str, float]:
    """Window-averaged backtest metrics, plus both holdout scores the promotion gate compared."""
    metrics: dict[str, float] = {"backtest_mase": score}
    if verdict.score is not None:
        metrics["holdout_mase"] = verdict.score
    for column in ("mae", "smape", "pinball_p50", "pinball_p90", "coverage_80", "coverage_95"):
        if column in per_window:
            values = per_window[column].to_numpy(float)
            if np.isfinite(values).any():
                metrics[f"backtest_{column}"] = float(np.nanmean(values))
    if verdict.rescored_score is not None:
        metrics["champion_holdout_mase"] = verdict.rescored_score
    return metrics


def _run_params(job: ForecastJob, history: pd.DataFrame, estimator: BaseForecaster) -> dict[str, Any]:
    """The job, the data window and the estimator's scalar parameters (dicts stay in the model itself)."""
    return {
        "model": job.model,
        "horizon": job.horizon,
        "windows": job.windows,
        "step": job.origin_step,
        "levels": ",".join(map(str, job.levels)),
        "freq": job.freq,
        "data_start": history[TIME].min().isoformat(),
        "data_end": history[TIME].max().isoformat(),
        "n_series": history[ID].nunique(),
        "n_points": len(history),
        **{f"model.{k}": v for k, v in estimator.get_params().items() if not isinstance(v, dict | BaseForecaster)},
    }


def _model_card(job: ForecastJob, history: pd.DataFrame, score: float, per_series: pd.DataFrame, reason: str) -> str:
    return (
        f"# {FORECAST_FAMILY} ({job.model})\n\n"
        f"Hourly GPU demand, {job.horizon} steps ahead, intervals {job.levels} %.\n"
        f"Data: {history[ID].nunique()} series, {history[TIME].min()} to {history[TIME].max()}.\n"
        f"Backtest: {job.windows} origins, step {job.origin_step}; mean MASE {score:.4f}.\n"
        f"Promotion: {reason}.\n\n```\n{per_series.to_string(index=False)}\n```\n"
    )


def _log_version(
    registry: ModelRegistry,
    estimator: BaseForecaster,
    history: pd.DataFrame,
    forecast: pd.DataFrame,
    per_series: pd.DataFrame,
    *,
    job: ForecastJob,
    metrics: dict[str, float],
    verdict: Verdict,
    plots: bool,
) -> ModelVersionInfo:
    """One MLflow run (params, metrics, plots, per-series table, model card), registered as ``challenger``."""
    with tempfile.TemporaryDirectory(prefix=f"{FORECAST_FAMILY}-") as tmp:
        artifacts = forecast_plots(history, forecast, per_series, Path(tmp)) if plots else []
        metrics_csv = Path(tmp) / "backtest_per_series.csv"
        per_series.to_csv(metrics_csv, index=False)
        return registry.log_model(
            FORECAST_FAMILY,
            estimator,
            params=_run_params(job, history, estimator),
            metrics=metrics,
            tags={"git_revision": git_revision(), **verdict_tags(verdict)},
            artifacts=[*artifacts, metrics_csv],
            texts={"model_card.md": _model_card(job, history, metrics["backtest_mase"], per_series, verdict.reason)},
        )


def train_forecast(
    settings: Settings,
    history: pd.DataFrame,
    job: ForecastJob = ForecastJob(),
    *,
    registry: ModelRegistry | None = None,
    plots: bool = True,
) -> TrainOutcome:
    """Backtest, fit, compare with the champion, log and register one ``gpu-forecast`` version; promote if better."""
    check_horizon(job.horizon, "--horizon", last=_last_time(history), step=job.freq)
    registry = registry or ModelRegistry(settings.mlflow)
    template = make_model(job.model, horizon=job.horizon, freq=job.freq, params=job.model_params)
    fanned = _fanned(template, history, job)  # chunks of series, on the executor the command chose
    if fanned.model is None or fanned.forecast is None:  # fit=True always returns both
        raise ModelError("training fitted no model")
    estimator, per_window, forecast = fanned.model, fanned.per_window, fanned.forecast
    score = _score(per_window)
    per_series = summarize(per_window)
    verdict = _compare_with_champion(settings, registry, history, job, template)
    metrics = _run_metrics(per_window, score, verdict)
    info = _log_version(
        registry, estimator, history, forecast, per_series, job=job, metrics=metrics, verdict=verdict, plots=plots
    )
    return TrainOutcome(
        estimator=estimator,
        version=info.version,
        promoted=settle(registry, FORECAST_FAMILY, info.version, verdict),
        score=score,
        champion_score=verdict.champion_score,
        metrics=metrics,
        per_series=per_series,
        reason=verdict.reason,
        holdout_score=verdict.score,
    )
