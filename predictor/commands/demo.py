"""``predictor demo``: the README's main job on embedded defaults (no cluster needed).

simulate 5 weeks → right-size → train the three model families into a local sqlite MLflow
(``DIR/mlflow.db``, champion aliases) → hourly loop cycles in plan mode → XDP profile plan → report.
Stages are listed in ``STAGES``: one function each, taking the shared ``DemoContext`` and returning what it
wrote (see ``predictor.demo``). The training stages live here because only the CLI may import ``pipelines``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from predictor.commands._common import console, settings_from
from predictor.demo import DemoContext, Stage, StageResult, run_stages
from predictor.demo.stages import history_stage, plan_stage, report_stage, rightsize_stage, xdp_stage
from predictor.registry import DEMAND_FAMILY, FORECAST_FAMILY, RCA_FAMILY

if TYPE_CHECKING:
    import pandas as pd

    from predictor.registry import ModelRegistry

__all__ = ["STAGES", "demo"]

# Fast candidates for the demo's weekly backtest on 2 cores (the LSTM and MSTL are what `train forecast` adds).
DEMO_FORECAST_CANDIDATES = ("naive", "drift", "seasonal_naive_24", "seasonal_naive_168", "ets")


def _registry(ctx: DemoContext) -> ModelRegistry:
    from predictor.registry import ModelRegistry

    return ModelRegistry(ctx.settings.mlflow)


def _store(ctx: DemoContext) -> tuple[Path, ...]:
    """The local MLflow files a training stage wrote to (nothing to list for a remote tracking server)."""
    uri = ctx.settings.mlflow.tracking_uri
    return (Path(uri.removeprefix("sqlite:///")), ctx.out / "mlruns") if uri.startswith("sqlite:///") else ()


def train_forecast_stage(ctx: DemoContext) -> StageResult:
    """Backtest ``auto`` over fast candidates, register gpu-forecast, promote if it beats the champion."""
    from pipelines.forecast import ForecastJob, train_forecast
    from predictor.loop import RegistryForecaster

    registry = _registry(ctx)
    job = ForecastJob(model="auto", windows=1, model_params={"candidates": DEMO_FORECAST_CANDIDATES, "windows": 2})
    ctx.progress("train forecasts: rolling backtest of auto")
    outcome = train_forecast(ctx.settings, ctx.state["inputs"].demand, job, registry=registry)
    ctx.state["forecaster"] = RegistryForecaster(registry)
    verdict = "champion" if outcome.promoted else "challenger (champion kept)"
    ctx.headline[FORECAST_FAMILY] = f"v{outcome.version} {verdict}, backtest MASE {outcome.score:.3f}"
    return StageResult("done", f"{FORECAST_FAMILY} v{outcome.version} → {verdict}; {outcome.reason}", _store(ctx))


def train_demand_stage(ctx: DemoContext) -> StageResult:
    """Quantile regressors of what workloads really use, judged against the VPA and KRR rules; the
    queue-peak regressor on the queues' own demand and pending GPUs, served by the loop stage."""
    from pipelines.demand import DemandJob, train_demand
    from predictor.loop.demand import FrameJobs, RegistryDemand

    ctx.progress("train demand regressors")
    inputs = ctx.state.get("inputs")
    queues, pending = _queue_demand(inputs.demand, inputs.allocated) if inputs is not None else (None, None)
    registry = _registry(ctx)
    outcome = train_demand(ctx.settings, ctx.state["runs"], DemandJob(), registry=registry, queues=queues)
    if pending is not None:
        ctx.state["demand_reader"] = RegistryDemand(registry, FrameJobs(pending))
    verdict = "champion" if outcome.promoted else "challenger (champion kept)"
    ctx.headline[DEMAND_FAMILY] = f"v{outcome.version} {verdict}"
    return StageResult("done", f"{DEMAND_FAMILY} v{outcome.version} → {verdict}; {outcome.reason}", _store(ctx))


def _queue_demand(demand: pd.DataFrame, allocated: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(training rows ``series_id, timestamp, demand, pending``, pending GPUs as a history frame).

    Pending = requested − allocated per queue and hour: what Volcano's gauges say (``QUEUE_PENDING``).
    """
    import pandas as pd

    both = demand.merge(allocated, on=["series_id", "timestamp"], how="left", suffixes=("", "_alloc"))
    pending = (both["value"] - both["value_alloc"]).clip(lower=0)
    train = pd.DataFrame(
        {"series_id": both["series_id"], "timestamp": both["timestamp"], "demand": both["value"], "pending": pending}
    )
    return train, pd.DataFrame(
        {"series_id": both["series_id"], "timestamp": both["timestamp"], "value": pending}
    ).dropna()


def train_rca_stage(ctx: DemoContext) -> StageResult:
    """The root-cause tree on the quick fault scenarios (the scheduled job trains on the full set)."""
    from pipelines.rca import RcaJob, train_rca

    ctx.progress("train root-cause tree (quick scenarios)")
    outcome = train_rca(ctx.settings, RcaJob(quick=True, cache_dir=ctx.out / "cache" / "rca"), registry=_registry(ctx))
    ctx.headline[RCA_FAMILY] = f"v{outcome.version} macro-F1 {outcome.report.macro_f1:.2f}"
    return StageResult("done", outcome.summary(), _store(ctx))


STAGES: tuple[Stage, ...] = (
    Stage("history", history_stage),
    Stage("right-size workloads", rightsize_stage, requires=("as_of",)),
    Stage("train forecasts", train_forecast_stage, requires=("inputs",)),
    Stage("train demand regressors", train_demand_stage, requires=("runs",)),
    Stage("train root-cause tree", train_rca_stage),
    Stage("plan queues (hourly loop cycles, plan mode)", plan_stage, requires=("inputs", "forecaster")),
    Stage("plan XDP profiles", xdp_stage, requires=("history_dir", "as_of")),
    Stage("write report", report_stage, requires=("inputs", "forecaster")),
)


def demo(
    ctx: typer.Context,
    out: Annotated[Path, typer.Option("--out", help="Directory for everything the demo writes.")] = Path("demo-out"),
    # Not the shared PrometheusUrlOption: here the flag replaces the simulation, not a configured URL.
    prometheus_url: Annotated[
        str | None,
        typer.Option("--prometheus-url", help="Read history from this Prometheus instead of simulating."),
    ] = None,
    # Not the shared TrackingUriOption: without it the demo keeps MLflow under DIR, not in the settings' store.
    tracking_uri: Annotated[
        str | None, typer.Option("--tracking-uri", help="MLflow tracking URI instead of DIR/mlflow.db.")
    ] = None,
    weeks: Annotated[float, typer.Option("--weeks", min=3, max=12, help="Weeks to simulate.")] = 5.0,
    nodes: Annotated[int, typer.Option("--nodes", min=2, max=128, help="8-GPU nodes to simulate.")] = 16,
) -> None:
    """Run the main job end to end on embedded defaults: simulate, train, plan, report."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    out.mkdir(parents=True, exist_ok=True)
    mlflow: dict[str, str] = (
        {"tracking_uri": tracking_uri}
        if tracking_uri
        else {
            # Local default: the sqlite store and its artifacts both under DIR (not ./mlruns of the cwd).
            "tracking_uri": f"sqlite:///{(out / 'mlflow.db').resolve()}",
            "artifact_location": (out / "mlruns").resolve().as_uri(),
        }
    )
    settings = settings_from(ctx, prometheus={"url": prometheus_url}, mlflow=mlflow)
    demo_ctx = DemoContext(
        out=out,
        settings=settings,
        options={"prometheus_url": prometheus_url, "sim": {"weeks": weeks, "nodes": nodes}},
    )
    started = time.perf_counter()
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True
    ) as bar:
        task = bar.add_task("starting", total=None)
        demo_ctx.progress = lambda text: bar.update(task, description=text)

        def start(stage: Stage) -> None:
            bar.update(task, description=stage.name)

        def done(stage: Stage, result: StageResult) -> None:
            mark = {"done": "✓", "reused": "✓", "failed": "✗"}.get(result.status, "·")
            bar.console.print(
                f"{mark} {stage.name}: {result.status} ({result.seconds:.0f} s) {result.summary}",
                markup=False,
                highlight=False,
            )

        results = run_stages(STAGES, demo_ctx, on_start=start, on_done=done)
    _print_summary(demo_ctx, results, time.perf_counter() - started)
    if any(r.status == "failed" for _, r in results):
        raise typer.Exit(1)


def _print_summary(ctx: DemoContext, results: list[tuple[Stage, StageResult]], seconds: float) -> None:
    table = Table(title=f"predictor demo → {ctx.out.resolve()} ({seconds:.0f} s)")
    for column in ("stage", "status", "wrote"):
        table.add_column(column)
    for stage, result in results:
        wrote = ", ".join(_short(p, ctx.out) for p in result.wrote)
        table.add_row(stage.name, result.status, wrote)
    console.print(table)
    for key, value in ctx.headline.items():
        console.print(f"{key}: {value}", markup=False, highlight=False)
    report = ctx.out / "report" / "report.html"
    if report.is_file():
        console.print(f"open the report: {report.resolve()}", markup=False, highlight=False)


def _short(path: Path, base: Path) -> str:
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)
