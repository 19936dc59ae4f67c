"""``predictor demand``: the ``gpu-demand`` champion's per-queue peaks, written where ``plan --demand`` reads them.

Thin: the same ``RegistryDemand`` the loop serves in memory (``predictor.loop.demand``), fed from
Prometheus (queue demand history + pending jobs through the PromQL catalogue) or from files.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from predictor.commands._common import console, settings_from
from predictor.commands._options import HistoryOption, SettingsFileOption
from predictor.errors import InputError
from predictor.timeparse import parse_time

if TYPE_CHECKING:
    from predictor.config import Settings
    from predictor.loop import HistoryReader
    from predictor.loop.demand import JobsReader

__all__ = ["demand_command"]


def jobs_reader(settings: Settings, pending: Path | None, history: Path | None) -> JobsReader | None:
    """Pending jobs from ``--pending``, else from Prometheus unless the history is a file (then: none)."""
    from predictor.loop.demand import FileJobs, SourceJobs

    if pending is not None:
        return FileJobs(pending)
    if history is not None:
        return None
    from predictor.sources.prometheus import PrometheusSource

    return SourceJobs(PrometheusSource(settings.prometheus))


def demand_command(
    ctx: typer.Context,
    out: Annotated[
        Path, typer.Option("--out", help="File to write (.csv or .parquet): the input of `predictor plan --demand`.")
    ],
    history: HistoryOption = None,
    pending: Annotated[
        Path | None,
        typer.Option("--pending", help="Pending GPUs per queue (series_id, timestamp, value) instead of Prometheus."),
    ] = None,
    now: Annotated[str | None, typer.Option("--now", help="Prediction time (default: now).")] = None,
    config: SettingsFileOption = None,
) -> None:
    """Predict each queue's GPU peak over the next hours with the gpu-demand champion (as registered).

    One row per queue with a prediction; a queue without job data or a week of history gets no row, and
    the reason is printed (its demand is unknown, not zero). No champion, or one that cannot be loaded, is
    an error and nothing is written (an empty file would read as "every queue unknown" to `plan --demand`).
    """
    import pandas as pd

    from predictor.loop.demand import RegistryDemand
    from predictor.registry import DEMAND_FAMILY, ModelRegistry
    from predictor.sources.files import write_frame

    settings = settings_from(ctx, config=config)
    at = parse_time(now, name="--now") if now else pd.Timestamp.now(tz="UTC")
    jobs = jobs_reader(settings, pending, history)
    if jobs is None:
        raise InputError(
            "--history is a file: give the pending jobs with --pending too (or read both from "
            "Prometheus), since demand without job data is unknown"
        )
    if pending is not None:
        jobs.pending(at)  # a bad --pending file is named even when no champion would have read it
    _check_local_store(settings.mlflow.tracking_uri)
    frame = _history(settings, history).history(at)
    prediction = RegistryDemand(ModelRegistry(settings.mlflow), jobs, resource=settings.planner.resource).demand(
        frame, at
    )
    if not prediction.versions:  # the loop would plan on the forecast alone; this command has nothing to write
        why = next(iter(prediction.unknown.values()), f"no champion for {DEMAND_FAMILY} could be read")
        raise InputError(f"no {DEMAND_FAMILY} model served ({settings.mlflow.tracking_uri}): {why}; nothing written")
    write_frame(prediction.frame, out)
    model = ", ".join(f"{k} v{v}" for k, v in prediction.versions.items()) or "no model"
    console.print(f"wrote {len(prediction.frame)} queues to {out} ({model})", markup=False, highlight=False)
    for queue, why in sorted(prediction.unknown.items()):
        console.print(f"demand unknown for {queue}: {why}", markup=False, highlight=False, soft_wrap=True)


def _check_local_store(uri: str) -> None:
    """A sqlite tracking URI naming no file: MLflow would create an empty store there and find no champion."""
    if uri.startswith("sqlite:///") and uri != "sqlite:///:memory:":
        path = Path(uri.removeprefix("sqlite:///").split("?", 1)[0])
        if not path.is_file():
            raise InputError(
                f"mlflow.tracking_uri {uri}: no such database file {path} (train a model first, or "
                "set PREDICTOR_MLFLOW__TRACKING_URI)"
            )


def _history(settings: Settings, history: Path | None) -> HistoryReader:
    from predictor.loop import FileHistory, SourceHistory

    if history is not None:
        return FileHistory(history)
    from predictor.sources.prometheus import PrometheusSource

    return SourceHistory(PrometheusSource(settings.prometheus))
