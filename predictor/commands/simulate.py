"""``predictor simulate``: trace-driven cluster history.

Thin: parse flags into settings, call ``predictor.sim.simulate``, report with rich. Known errors surface
as one line through the CLI's error handling.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import pandas as pd
import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from predictor.commands._common import console
from predictor.errors import InputError
from predictor.timeparse import parse_duration, parse_time

if TYPE_CHECKING:
    from predictor.sim import SimResult, SimSettings

__all__ = ["simulate"]


def simulate(
    jobs: Annotated[
        Path | None,
        typer.Option("--jobs", help="Job table (CSV/Parquet): submit_time, queue or vc, num_gpus, duration_s."),
    ] = None,
    synthetic: Annotated[bool, typer.Option("--synthetic", help="Generate synthetic jobs.")] = False,
    philly_sample: Annotated[bool, typer.Option("--philly-sample", help="Use the bundled Philly sample.")] = False,
    start: Annotated[str | None, typer.Option("--start", help="First sample time, ISO 8601.")] = None,
    weeks: Annotated[float, typer.Option("--weeks", help="Weeks of history to emit.")] = 1.0,
    nodes: Annotated[int, typer.Option("--nodes", help="Number of 8-GPU nodes.")] = 64,
    gpu_types: Annotated[str, typer.Option("--gpu-types", help="H100, or pools like H100:48,A100:16.")] = "H100",
    step: Annotated[str, typer.Option("--step", help="Sample step (1m, 5m, 30s …).")] = "1m",
    seed: Annotated[int, typer.Option("--seed", help="Random seed (runs are deterministic for a seed).")] = 0,
    faults: Annotated[float, typer.Option("--faults", help="Injected faults per day, cluster-wide.")] = 0.0,
    queues: Annotated[
        Path | None, typer.Option("--queues", help="Queue table: queue, deserved[, weight, capability, guarantee].")
    ] = None,
    quota_schedule: Annotated[
        Path | None,
        typer.Option("--quota-schedule", help="Quota changes: timestamp, queue, deserved and/or capability."),
    ] = None,
    metrics: Annotated[str, typer.Option("--metrics", help="Metric families: all, core, or globs.")] = "all",
    jobs_per_hour: Annotated[float, typer.Option("--jobs-per-hour", help="Synthetic arrival rate.")] = 60.0,
    workloads_per_queue: Annotated[
        int,
        typer.Option(
            "--workloads-per-queue",
            min=0,
            help="Synthetic jobs recur as runs of this many workload templates per "
            "queue (Zipf-skewed); 0: every job is its own workload.",
        ),
    ] = 0,
    out: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("sim-out"),
    openmetrics: Annotated[bool, typer.Option("--openmetrics", help="Also write metrics.om for promtool.")] = False,
    parquet: Annotated[bool, typer.Option("--parquet/--no-parquet", help="Write Parquet long frames.")] = True,
) -> None:
    """Simulate a Volcano GPU cluster from a job table and write its Prometheus history."""
    from predictor import sim
    from predictor.atomicio import check_output_directory
    from predictor.sim.jobs import read_table

    if sum([jobs is not None, synthetic, philly_sample]) != 1:
        raise InputError("give exactly one of --jobs FILE, --synthetic or --philly-sample")
    if nodes < 1:
        raise InputError(f"--nodes must be >= 1, got {nodes}")
    check_output_directory(out)
    step_td = parse_duration(step, name="--step")
    start_ts = parse_time(start, name="--start") if start else None
    settings = sim.SimSettings(
        start=start_ts,
        weeks=weeks,
        step_s=int(step_td.total_seconds()),
        seed=seed,
        fault_rate_per_day=faults,
        metrics=metrics,
    )
    cluster = sim.parse_gpu_types(gpu_types, nodes)
    table, settings = _job_table(jobs, philly_sample, settings, jobs_per_hour, workloads_per_queue)
    queue_specs = sim.queues_from_frame(read_table(queues), str(queues)) if queues else None
    changes = sim.quota_schedule_from_frame(read_table(quota_schedule), str(quota_schedule)) if quota_schedule else ()
    with Progress(
        TextColumn("{task.description:<48}"), BarColumn(), TimeElapsedColumn(), console=console, transient=True
    ) as bar:
        task = bar.add_task("schedule", total=1.0)

        def progress(stage: str, fraction: float) -> None:
            bar.update(task, description=stage, completed=min(max(fraction, 0.0), 1.0))

        result = sim.simulate(table, cluster, settings, queues=queue_specs, quota_changes=changes, progress=progress)
        counts = result.write(out, openmetrics=openmetrics, parquet=parquet, progress=progress)
    console.print(_summary_table(result, counts, f"simulated {weeks:g} weeks, {cluster.n_gpus} GPUs → {out}"))


def _job_table(
    jobs: Path | None, philly_sample: bool, settings: SimSettings, jobs_per_hour: float, workloads_per_queue: int = 0
) -> tuple[pd.DataFrame, SimSettings]:
    """The job table to replay: a file, the bundled Philly sample, or synthetic jobs (which fix the start)."""
    from predictor import sim

    if jobs is not None:
        return sim.load_jobs(jobs), settings
    if philly_sample:
        return sim.philly_sample(), settings
    begin = settings.start if settings.start is not None else pd.Timestamp("2026-01-05", tz="UTC")
    weeks = pd.Timedelta(weeks=settings.weeks)
    table = sim.synthetic_jobs(
        begin - pd.Timedelta(days=settings.warmup_days),
        begin + weeks,
        seed=settings.seed,
        jobs_per_hour=jobs_per_hour,
        workloads_per_queue=workloads_per_queue,
    )
    return table, settings.model_copy(update={"start": begin})


def _summary_table(result: SimResult, counts: Mapping[str, int], title: str) -> Table:
    from predictor import sim

    totals = sim.summary_totals(result.summary, result.schedule.attempts)
    summary = Table(title=title)
    summary.add_column("what")
    summary.add_column("value", justify="right")
    for name, value in totals.items():
        summary.add_row(name, f"{value:,.2f}")
    summary.add_row("faults injected", str(len(result.faults)))
    for name, count in counts.items():
        summary.add_row(f"samples ({name})", f"{count:,}")
    return summary
