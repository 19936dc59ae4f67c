"""``predictor report``: the weekly quota recommendation report from files or Prometheus.

Thin (STYLE §13): gather inputs, forecast with the registry's champion (or a named model), plan with the
planner's own policy, write HTML/Markdown/CSV/JSON. Heavy imports happen inside the command so that
``predictor --help`` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from predictor.commands._common import console, settings_from
from predictor.errors import DataSourceError, InputError

if TYPE_CHECKING:
    import pandas as pd

    from predictor.config import Settings
    from predictor.reports.inputs import ReportInputs

__all__ = ["register"]


def register(app: typer.Typer, train: typer.Typer) -> None:
    """Add ``report`` to the root app."""
    app.command("report")(report)


def report(
    ctx: typer.Context,
    out: Annotated[Path, typer.Option("--out", help="Directory for report.{html,md,csv,json}.")],
    history: Annotated[Path | None, typer.Option("--history", help="Simulator output directory "
                                                  "(predictor simulate --out DIR).")] = None,
    prometheus_url: Annotated[str | None, typer.Option("--prometheus-url", help="Prometheus base URL.")] = None,
    registry: Annotated[str | None, typer.Option("--registry", help="MLflow tracking URI: forecast with the "
                                                  "gpu-forecast champion.")] = None,
    model: Annotated[str, typer.Option("--model", help="Forecaster when no --registry is given.")] = "auto",
    days: Annotated[int, typer.Option("--days", min=8, help="Days of Prometheus history.")] = 35,
    end: Annotated[str | None, typer.Option("--end", help="End of the Prometheus history, ISO 8601 "
                                            "(default: now).")] = None,
    window_days: Annotated[int, typer.Option("--window-days", min=1, max=28, help="Days the report "
                                             "summarises and forecasts.")] = 7,
    rightsize: Annotated[bool, typer.Option("--rightsize/--no-rightsize", help="Add right-sizing savings "
                                             "(from the same history).")] = True,
) -> None:
    """Write the quota recommendation report (HTML with plots, Markdown, CSV, JSON) for every queue."""
    import pandas as pd
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from predictor.atomicio import check_output_directory
    from predictor.reports.assemble import make_report
    from predictor.reports.inputs import inputs_from_directory, inputs_from_prometheus
    from predictor.timeparse import parse_time

    if (history is None) == (prometheus_url is None):
        raise InputError("give exactly one of --history DIR or --prometheus-url URL")
    check_output_directory(out)
    settings = settings_from(ctx, prometheus={"url": prometheus_url}, mlflow={"tracking_uri": registry})
    table = None
    horizon = window_days * 24
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                  transient=True) as bar:
        task = bar.add_task("reading history", total=None)

        def say(text: str) -> None:
            bar.update(task, description=text)

        if history is not None:
            inputs = inputs_from_directory(history)
        else:
            until = parse_time(end, name="--end") if end else pd.Timestamp.now(tz="UTC").floor("h")
            inputs = inputs_from_prometheus(settings.prometheus, end=until, days=days)
        if rightsize:
            say("right-sizing workloads")
            table = _rightsize_table(inputs, history, settings)
        forecast, used = _forecast(inputs, settings, registry, model, horizon, say)
        outcome = make_report(inputs, forecast, settings.planner, out, rightsize=table, window_days=window_days,
                              sources={"forecast": used}, progress=say)
    s = outcome.report.summary
    console.print(f"report for {len(outcome.report.queues)} queues, data up to {s.as_of}", markup=False)
    for action in s.top_actions:
        console.print(f"  {action}", markup=False, highlight=False)
    for kind, path in outcome.paths.items():
        console.print(f"{kind}: {path}", markup=False, highlight=False)


def _rightsize_table(inputs: ReportInputs, history: Path | None, settings: Settings) -> pd.DataFrame | None:
    """Right-sizing savings from the same history; without them (a note says why) quotas are still reported."""
    import pandas as pd

    from predictor.reports.inputs import rightsize_from_directory, rightsize_from_prometheus, rightsize_savings

    try:
        found = rightsize_from_directory(history) if history is not None else \
            rightsize_from_prometheus(settings.prometheus, end=inputs.as_of + pd.Timedelta(hours=1))
        return rightsize_savings(*found)
    except (InputError, DataSourceError) as exc:  # quotas are still worth reporting without it
        inputs.notes.append(f"right-sizing unavailable: {exc}")
        return None


def _forecast(inputs: ReportInputs, settings: Settings, registry: str | None, model: str, horizon: int,
              say: Callable[[str], None]) -> tuple[pd.DataFrame, str]:
    """The demand forecast and what made it: the registry's champion, or ``model`` fitted here."""
    if registry is not None:
        from predictor.loop import RegistryForecaster
        from predictor.registry import ModelRegistry

        say("forecasting with the gpu-forecast champion")
        forecast, versions = RegistryForecaster(ModelRegistry(settings.mlflow)).forecast(
            inputs.demand, horizon=horizon)
        return forecast, ", ".join(versions.values())  # model URIs: models:/gpu-forecast/7
    from pipelines.forecast import run_forecast

    say(f"forecasting with {model}")
    return run_forecast(inputs.demand, model=model, horizon=horizon).forecast, model
