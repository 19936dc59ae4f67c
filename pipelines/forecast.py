"""The forecast training job: history → fit → rolling backtest → MLflow run → promote if better.

Also the plain ``forecast`` and ``backtest`` operations the CLI exposes, so that the CLI stays thin and
the same code paths run in a CronJob, a notebook and the tests. History comes from a file or from
Prometheus (one PromQL per series family: cluster- and queue-level GPU demand = allocated + pending).
``champion`` moves only when the new model's backtest beats the champion's *on the same window*: the
champion's configuration is refitted and backtested on exactly the history the challenger saw.
"""

from __future__ import annotations

import subprocess
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
    summarize,
)
from models.frames import ID, TIME, VALUE
from predictor.config import Settings
from predictor.errors import InputError, ModelError, RegistryError
from predictor.registry import ModelRegistry, beats
from predictor.sources.queries import CLUSTER_DEMAND, QUEUE_DEMAND

__all__ = [
    "DEFAULT_QUERIES",
    "FAMILY",
    "MODEL_CHOICES",
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

FAMILY = "gpu-forecast"
MODEL_CHOICES = ("auto", "lstm", "ets", "mstl", "seasonal_naive", "naive")
BASELINES = ("naive", "drift", "seasonal_naive_24", "seasonal_naive_168", "ets", "mstl")

# One PromQL per series family, from the catalogue the loop and the reports read too (no train/serve skew).
DEFAULT_QUERIES: dict[str, str] = {"cluster": CLUSTER_DEMAND, "queue": QUEUE_DEMAND}


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


def make_model(name: str, *, horizon: int, freq: str = "1h", params: Mapping[str, Any] | None = None) -> BaseForecaster:
    """A forecaster by CLI name; horizon-aware models are told the horizon they will serve."""
    extra = dict(params or {})
    if name in ("lstm", "auto"):
        extra.setdefault("horizon", horizon)
    if name == "auto":
        extra.setdefault("step", horizon)
        candidate = dict(extra.get("candidate_params") or {})
        candidate.setdefault("lstm", {"horizon": horizon})
        extra["candidate_params"] = candidate
    try:
        model: BaseForecaster = forecasters.create(name, freq=freq, **extra)
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
    if horizon < 1:
        raise InputError(f"--horizon must be positive, got {horizon}")
    estimator = make_model(model, horizon=horizon, freq=freq)
    try:
        forecast = estimator.fit(history).predict(horizon, level=tuple(levels))
    except ValueError as exc:
        raise _model_error(exc) from exc
    notes = [f"{sid}: {note}" for sid, note in getattr(estimator, "notes_", {}).items()]
    if isinstance(estimator, AutoForecaster):
        notes += [f"{sid}: auto serves {choice}" for sid, choice in estimator.choices_.items()]
    return ForecastOutcome(forecast=forecast, notes=notes)


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
            records = records_for_auto(result, windows, int(estimator.windows), estimator.ensemble_sizes)
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
    models: Sequence[str] = (*BASELINES, "lstm", "auto"),
    horizon: int = 168,
    windows: int = 4,
    step: int | None = None,
    freq: str = "1h",
) -> pd.DataFrame:
    """Metrics per series and model, averaged over the backtest windows (the ``backtest`` command)."""
    step = step or horizon
    parts = []
    for name in models:
        model = make_model(name, horizon=horizon, freq=freq)
        parts.append(evaluate(model, history, horizon=horizon, windows=windows, step=step, name=name))
    return summarize(pd.concat(parts, ignore_index=True))


def _score(per_window: pd.DataFrame) -> float:
    """Promotion score: mean over series of the window-averaged MASE (lower is better)."""
    per_series = per_window.groupby(ID)["mase"].mean()
    return float(per_series.mean()) if per_series.notna().any() else float(per_window["mae"].mean())


def load_prometheus_history(
    settings: Settings,
    *,
    family: str = "queue",
    query: str | None = None,
    start: pd.Timestamp,
    end: pd.Timestamp,
    step: str = "1h",
) -> pd.DataFrame:
    """History for one series family from Prometheus (``query`` overrides the family's default)."""
    if query is None:
        if family not in DEFAULT_QUERIES:
            raise InputError(f"unknown series family {family!r} (known: {', '.join(DEFAULT_QUERIES)})")
        query = DEFAULT_QUERIES[family]
    # imported here: the module belongs to the sources layer and pulls in HTTP clients
    from predictor.sources.prometheus import PrometheusSource

    frame: pd.DataFrame = PrometheusSource(settings.prometheus).query_range(query, start, end, pd.Timedelta(step))
    if frame.empty:
        raise InputError(f"Prometheus returned no samples for the {family} demand query between {start} and {end}")
    frame = frame.copy()
    # The planner joins forecasts to Queue objects by name: a queue series is named after its queue,
    # the cluster series "cluster"; any other query keeps the family prefix on Prometheus' series id.
    if family == "queue" and query == DEFAULT_QUERIES["queue"] and "queue_name" in frame.columns:
        frame[ID] = frame["queue_name"].astype(str)
    elif family == "cluster" and frame[ID].nunique() == 1:
        frame[ID] = "cluster"
    else:
        frame[ID] = family + "/" + frame[ID].astype(str)
    return frame


def _git_revision() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def _plots(history: pd.DataFrame, forecast: pd.DataFrame, per_series: pd.DataFrame, directory: Path) -> list[Path]:
    """A fan chart of the largest series and the per-series MASE bars (PNG files to log)."""
    import matplotlib

    matplotlib.use("Agg")  # headless: training runs in CronJobs
    import matplotlib.pyplot as plt

    paths = []
    top = history.groupby(ID)[VALUE].mean().sort_values(ascending=False).index[:4]
    fig, axes = plt.subplots(len(top), 1, figsize=(10, 2.6 * len(top)), squeeze=False)
    for ax, sid in zip(axes[:, 0], top, strict=False):
        past = history[history[ID] == sid].tail(24 * 21)
        fut = forecast[forecast[ID] == sid]
        ax.plot(past[TIME], past[VALUE], color="black", lw=0.8, label="history")
        ax.plot(fut[TIME], fut["mean"], color="tab:blue", lw=1.0, label="forecast")
        for lvl, alpha in ((95, 0.15), (80, 0.3)):
            if f"lo-{lvl}" in fut:
                ax.fill_between(fut[TIME], fut[f"lo-{lvl}"], fut[f"hi-{lvl}"], color="tab:blue", alpha=alpha, lw=0)
        ax.set_title(str(sid), fontsize=9)
        ax.set_ylabel("GPUs")
    fig.tight_layout()
    paths.append(directory / "forecast_fan.png")
    fig.savefig(paths[-1], dpi=80)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(per_series) + 1.5))
    ax.barh(per_series[ID].astype(str), per_series["mase"])
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("backtest MASE (1 = in-sample weekly seasonal naive)")
    fig.tight_layout()
    paths.append(directory / "backtest_mase.png")
    fig.savefig(paths[-1], dpi=80)
    plt.close(fig)
    return paths


def train_forecast(
    settings: Settings,
    history: pd.DataFrame,
    job: ForecastJob = ForecastJob(),
    *,
    registry: ModelRegistry | None = None,
    plots: bool = True,
) -> TrainOutcome:
    """Fit, backtest, log and register one ``gpu-forecast`` version; promote it if it beats the champion."""
    registry = registry or ModelRegistry(settings.mlflow)
    step = job.origin_step
    estimator = make_model(job.model, horizon=job.horizon, freq=job.freq, params=job.model_params)
    per_window = evaluate(estimator, history, horizon=job.horizon, windows=job.windows, step=step, name=job.model)
    score = _score(per_window)
    per_series = summarize(per_window)
    try:
        estimator.fit(history)
        forecast = estimator.predict(job.horizon, level=job.levels)
    except ValueError as exc:
        raise _model_error(exc) from exc

    champion = registry.get(FAMILY)
    champion_score: float | None = None
    reason = "no champion yet"
    if champion is not None:
        try:
            champion_estimator = clone(registry.load_estimator(FAMILY))
            champion_window = evaluate(
                champion_estimator, history, horizon=job.horizon, windows=job.windows, step=step, name="champion"
            )
            champion_score = _score(champion_window)
            reason = (
                f"backtest MASE {score:.4f} vs champion v{champion.version} {champion_score:.4f} on the same window"
            )
        except (RegistryError, ModelError, InputError) as exc:
            reason = f"champion v{champion.version} could not be re-evaluated ({exc}); keeping it"
            champion_score = float("nan")

    window_start, window_end = history[TIME].min(), history[TIME].max()
    metrics: dict[str, float] = {"backtest_mase": score}
    for column in ("mae", "smape", "pinball_p50", "pinball_p90", "coverage_80", "coverage_95"):
        if column in per_window:
            values = per_window[column].to_numpy(float)
            if np.isfinite(values).any():
                metrics[f"backtest_{column}"] = float(np.nanmean(values))
    if champion_score is not None and np.isfinite(champion_score):
        metrics["champion_backtest_mase"] = champion_score
    params = {
        "model": job.model,
        "horizon": job.horizon,
        "windows": job.windows,
        "step": step,
        "levels": ",".join(map(str, job.levels)),
        "freq": job.freq,
        "data_start": window_start.isoformat(),
        "data_end": window_end.isoformat(),
        "n_series": history[ID].nunique(),
        "n_points": len(history),
        **{f"model.{k}": v for k, v in estimator.get_params().items() if not isinstance(v, dict)},
    }
    card = (
        f"# gpu-forecast ({job.model})\n\nHourly GPU demand, {job.horizon} steps ahead, intervals {job.levels} %.\n"
        f"Data: {history[ID].nunique()} series, {window_start} to {window_end}.\n"
        f"Backtest: {job.windows} origins, step {step}; mean MASE {score:.4f}.\n"
        f"Promotion: {reason}.\n\n```\n{per_series.to_string(index=False)}\n```\n"
    )
    with tempfile.TemporaryDirectory(prefix="gpu-forecast-") as tmp:
        artifacts = _plots(history, forecast, per_series, Path(tmp)) if plots else []
        metrics_csv = Path(tmp) / "backtest_per_series.csv"
        per_series.to_csv(metrics_csv, index=False)
        info = registry.log_model(
            FAMILY,
            estimator,
            params=params,
            metrics=metrics,
            tags={"git_revision": _git_revision(), "promotion": reason},
            artifacts=[*artifacts, metrics_csv],
            texts={"model_card.md": card},
        )
    promoted = champion is None or (
        champion_score is not None
        and np.isfinite(champion_score)
        and beats(score, champion_score, settings.mlflow.promotion_margin)
    )
    if promoted:
        registry.promote(FAMILY, info.version)
    return TrainOutcome(
        estimator=estimator,
        version=info.version,
        promoted=promoted,
        score=score,
        champion_score=champion_score,
        metrics=metrics,
        per_series=per_series,
        reason=reason,
    )
