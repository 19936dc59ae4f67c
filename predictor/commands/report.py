"""``predictor report``: the weekly quota recommendation report from files or Prometheus.

Thin: gather inputs, plan with the loop's own planning step (``_report_plan``: the registry's champions or
a named model, workload, memory, cooldowns), write HTML/Markdown/CSV/JSON. Heavy imports happen inside the
command so that ``predictor --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from predictor.commands._common import console, settings_from
from predictor.commands._fleet import ClusterOpt, check_cluster_option, fleet
from predictor.commands._options import HistoryDirOption, PrometheusUrlOption
from predictor.errors import DataSourceError, InputError

if TYPE_CHECKING:
    import pandas as pd

    from predictor.config import Settings
    from predictor.reports.assemble import ReportOutcome
    from predictor.reports.inputs import ReportInputs
    from predictor.sources.clusters import ClusterSource

__all__ = ["report"]


def report(
    ctx: typer.Context,
    out: Annotated[Path, typer.Option("--out", help="Directory for report.{html,md,csv,json}.")],
    history: HistoryDirOption = None,
    prometheus_url: PrometheusUrlOption = None,
    registry: Annotated[
        str | None, typer.Option("--registry", help="MLflow tracking URI: forecast with the gpu-forecast champion.")
    ] = None,
    model: Annotated[str, typer.Option("--model", help="Forecaster when no --registry is given.")] = "auto",
    days: Annotated[int, typer.Option("--days", min=8, help="Days of Prometheus history.")] = 35,
    end: Annotated[
        str | None, typer.Option("--end", help="End of the Prometheus history, ISO 8601 (default: now).")
    ] = None,
    window_days: Annotated[
        int, typer.Option("--window-days", min=1, max=28, help="Days the report summarises and forecasts.")
    ] = 7,
    rightsize: Annotated[
        bool, typer.Option("--rightsize/--no-rightsize", help="Add right-sizing savings (from the same history).")
    ] = True,
    cluster: ClusterOpt = None,
    queues: Annotated[
        Path | None, typer.Option("--queues", help="kubectl get queues -o json: quotas with the guarantee.")
    ] = None,
    nodes: Annotated[Path | None, typer.Option("--nodes", help="kubectl get nodes -o json (allocatable).")] = None,
    kubeconfig: Annotated[
        Path | None, typer.Option("--kubeconfig", help="Read the Queue objects and nodes from the API server.")
    ] = None,
    state: Annotated[
        Path | None, typer.Option("--state", help="The loop's state file: plan with its stabilisation memory.")
    ] = None,
    audit_log: Annotated[
        Path | None, typer.Option("--audit-log", help="The loop's audit log: plan with its cooldowns.")
    ] = None,
) -> None:
    """Write the quota recommendation report (HTML with plots, Markdown, CSV, JSON) for every queue.

    With clusters in the settings (and no --history), one report per cluster under OUT/<cluster>/, each
    planned against its own cluster's GPUs, and OUT/report.csv, report-summary.csv and report.json for the
    fleet with every row naming its cluster.

    The recommendations are one planning step of the loop (``predictor.loop.planstep``): the same champions,
    workload shaping, stabilisation memory (--state) and cooldowns (--audit-log) as ``predictor loop``."""
    import pandas as pd
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from predictor.atomicio import check_output_directory
    from predictor.commands._report_plan import QueueFiles, loop_plan
    from predictor.reports.assemble import make_report
    from predictor.reports.inputs import inputs_from_directory, inputs_from_prometheus
    from predictor.timeparse import parse_time

    settings = settings_from(ctx, prometheus={"url": prometheus_url}, mlflow={"tracking_uri": registry})
    check_cluster_option(settings, cluster, history)
    if (history is None) == (prometheus_url is None) and not (history is None and settings.clusters):
        raise InputError("give exactly one of --history DIR or --prometheus-url URL")
    if settings.clusters and history is None and (queues or nodes or kubeconfig or state):
        raise InputError("--queues, --nodes, --kubeconfig and --state describe one cluster: not with a fleet")
    check_output_directory(out)
    horizon = window_days * 24
    outcomes: dict[str | None, ReportOutcome] = {}
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True
    ) as bar:
        task = bar.add_task("reading history", total=None)

        def say(text: str) -> None:
            bar.update(task, description=text)

        def one(inputs: ReportInputs, source: ClusterSource | None, folder: Path) -> ReportOutcome:
            table = _rightsize_table(inputs, history, settings, source) if rightsize else None
            say("planning as the loop does" if registry else f"planning as the loop does, forecasting with {model}")
            planned = loop_plan(
                inputs,
                settings,
                files=QueueFiles(queues, nodes, kubeconfig, state, audit_log),
                model=None if registry else model,
                window_h=horizon,
                source=None if history is not None else (source.source if source is not None else None),
                cluster=None if source is None else source.name,
            )
            return make_report(
                inputs,
                planned.forecast,
                settings.planner,
                folder,
                plan=planned.plan,
                plan_forecast=planned.plan_forecast,
                rightsize=table,
                window_days=window_days,
                sources={"forecast": planned.models},
                progress=say,
            )

        if history is not None:
            outcomes[None] = one(inputs_from_directory(history), None, out)
        else:
            until = parse_time(end, name="--end") if end else pd.Timestamp.now(tz="UTC").floor("h")
            # Every cluster is read before any report is written: one cluster's Prometheus being down
            # fails the command with nothing under OUT, not with the reports of the clusters read before it.
            read = []
            for source in fleet(settings, cluster):
                say("reading history" if source.name is None else f"reading history of cluster {source.name}")
                read.append(
                    (
                        source,
                        inputs_from_prometheus(
                            settings.prometheus, end=until, days=days, source=source.source, cluster=source.name
                        ),
                    )
                )
            for source, inputs in read:
                outcomes[source.name] = one(inputs, source, out if source.name is None else out / source.name)
    for name, outcome in outcomes.items():
        s = outcome.report.summary
        where = "" if name is None else f"cluster {name}: "
        console.print(f"{where}report for {len(outcome.report.queues)} queues, data up to {s.as_of}", markup=False)
        for action in s.top_actions:
            console.print(f"  {action}", markup=False, highlight=False)
        for kind, path in outcome.paths.items():
            console.print(f"{kind}: {path}", markup=False, highlight=False)
    if None not in outcomes:
        for path in _fleet_files(out, [name for name in outcomes if name is not None]):
            console.print(f"fleet: {path}", markup=False, highlight=False)


def _fleet_files(out: Path, clusters: list[str]) -> list[Path]:
    """OUT/report.csv, report-summary.csv (each cluster's rows with a leading ``cluster``) and report.json."""
    import json

    import pandas as pd

    from predictor.atomicio import write_text
    from predictor.commands._fleet import with_cluster
    from predictor.sources.files import write_frame

    written = []
    for name in ("report.csv", "report-summary.csv"):
        frames = [with_cluster(pd.read_csv(out / cluster / name), cluster) for cluster in clusters]
        written.append(write_frame(pd.concat(frames, ignore_index=True), out / name))
    each = {cluster: json.loads((out / cluster / "report.json").read_text(encoding="utf-8")) for cluster in clusters}
    written.append(write_text(out / "report.json", json.dumps({"clusters": each}, indent=2) + "\n"))
    return written


def _rightsize_table(
    inputs: ReportInputs, history: Path | None, settings: Settings, source: ClusterSource | None = None
) -> pd.DataFrame | None:
    """Right-sizing savings from the same history; without them (a note says why) quotas are still reported."""
    import pandas as pd

    from predictor.reports.inputs import rightsize_from_directory, rightsize_from_prometheus, rightsize_savings

    try:
        found = (
            rightsize_from_directory(history)
            if history is not None
            else rightsize_from_prometheus(
                settings.prometheus,
                end=inputs.as_of + pd.Timedelta(hours=1),
                source=None if source is None else source.source,
            )
        )
        return rightsize_savings(*found)
    except (InputError, DataSourceError) as exc:  # quotas are still worth reporting without it
        inputs.notes.append(f"right-sizing unavailable: {exc}")
        return None
