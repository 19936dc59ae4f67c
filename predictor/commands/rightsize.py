"""CLI: ``predictor rightsize`` and ``predictor train demand``.

Thin by design (no logic of its own): pick the source (a Prometheus range or a history file), build settings, call
``predictor.rightsize`` or ``pipelines.demand``, write atomically and print one line per outcome. Heavy
imports (pandas, scikit-learn, mlflow) happen inside the commands so ``predictor --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from predictor.commands._common import console, settings_from
from predictor.commands._fleet import CLUSTER_COLUMN, ClusterOpt, check_cluster_option, fleet, with_cluster
from predictor.commands._options import HistoryOrMetricsOption, PrometheusUrlOption, TrackingUriOption
from predictor.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

    from predictor.config import Settings
    from predictor.rightsize import RightsizeInput, RightsizeSettings
    from predictor.sources.clusters import ClusterSource

__all__ = ["DEFAULT_WINDOW_DAYS", "rightsize_cmd", "train_demand_cmd"]

DEFAULT_WINDOW_DAYS = 28
StartOpt = Annotated[str | None, typer.Option("--start", help="Start of the history window (ISO 8601).")]
EndOpt = Annotated[str | None, typer.Option("--end", help="End of the history window (ISO 8601).")]
StepOpt = Annotated[str, typer.Option("--step", help="Sample step of the history (e.g. 5m).")]
SharingOpt = Annotated[
    list[float] | None, typer.Option("--sharing-size", help="GPU fraction a sharing setup offers (repeatable).")
]


def _inputs(
    settings: Settings,
    url: str | None,
    start: str | None,
    end: str | None,
    history: Path | None,
    step: str,
    *,
    scheduled: bool = False,
    clusters: list[str] | None = None,
) -> tuple[list[tuple[str | None, RightsizeInput]], RightsizeSettings]:
    """Where the runs come from, per cluster (``None``: the single unnamed cluster, or a history file).

    ``scheduled`` (train demand in a CronJob) falls back to the configured Prometheus and the last
    ``DEFAULT_WINDOW_DAYS`` ending now, so the job needs no per-run flags; so do settings listing clusters."""
    import pandas as pd

    from predictor.rightsize import RightsizeSettings, from_history, from_source
    from predictor.timeparse import parse_duration, parse_time

    check_cluster_option(settings, clusters, history)
    step_td = parse_duration(step, name="--step")
    rs = RightsizeSettings(step_s=int(step_td.total_seconds()))
    if history is not None and url is not None:
        raise InputError("give either --history FILE or --prometheus-url URL, not both")
    if history is not None:
        return [(None, from_history(history))], rs
    if url is None and not scheduled and not settings.clusters:
        raise InputError("give either --history FILE or --prometheus-url URL with --start and --end")
    if scheduled:
        t1 = parse_time(end, name="--end") if end else pd.Timestamp.now(tz="UTC").floor("min")
        t0 = parse_time(start, name="--start") if start else t1 - pd.Timedelta(days=DEFAULT_WINDOW_DAYS)
    else:
        if start is None or end is None:
            raise InputError("--prometheus-url needs --start and --end (ISO 8601)")
        t0, t1 = parse_time(start, name="--start"), parse_time(end, name="--end")
    if t1 <= t0:
        raise InputError(f"--end {end or t1.isoformat()} is not after --start {start or t0.isoformat()}")
    return [(c.name, from_source(c.source, t0, t1, step_td)) for c in fleet(settings, clusters)], rs


def _queue_hours(
    settings: Settings, start: str | None, end: str | None, clusters: list[str] | None = None
) -> pd.DataFrame | None:
    """Hourly ``series_id, timestamp, demand, pending`` per queue from Prometheus, by the loop's own queries.

    The queue-peak regressor is served on ``QUEUE_DEMAND`` and ``QUEUE_PENDING`` (``predictor.loop.demand``),
    so it is trained on them too; ``None`` (fall back to the runs' hourly requests) when Prometheus has no
    queue demand series over the window. Queues of a named cluster are ``cluster/queue``.
    """
    import pandas as pd

    from predictor.timeparse import parse_time

    t1 = parse_time(end, name="--end") if end else pd.Timestamp.now(tz="UTC").floor("min")
    t0 = parse_time(start, name="--start") if start else t1 - pd.Timedelta(days=DEFAULT_WINDOW_DAYS)
    per_cluster = [_cluster_queue_hours(c, t0, t1) for c in fleet(settings, clusters)]
    found = [frame for frame in per_cluster if frame is not None]
    return pd.concat(found, ignore_index=True) if found else None


def _cluster_queue_hours(cluster: ClusterSource, t0: pd.Timestamp, t1: pd.Timestamp) -> pd.DataFrame | None:
    import pandas as pd

    from predictor.sources.queries import QUEUE_DEMAND, QUEUE_LABEL, QUEUE_PENDING

    hour = pd.Timedelta(hours=1)
    parts = []
    for query, column in ((QUEUE_DEMAND, "demand"), (QUEUE_PENDING, "pending")):
        frame = cluster.source.query_range(query, t0, t1, hour)
        if frame.empty or QUEUE_LABEL not in frame.columns:
            continue
        parts.append(
            pd.DataFrame(
                {
                    "series_id": frame[QUEUE_LABEL].astype(str).map(cluster.qualify),
                    "timestamp": frame["timestamp"],
                    column: pd.to_numeric(frame["value"], errors="coerce"),
                }
            )
        )
    if not parts or "demand" not in parts[0].columns:
        return None
    out = parts[0]
    if len(parts) > 1:
        out = out.merge(parts[1], on=["series_id", "timestamp"], how="left")
    return out.reset_index(drop=True)


def _rightsize_fleet(
    inputs: list[tuple[str | None, RightsizeInput]],
    rs: RightsizeSettings,
) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Recommendations and runs of every cluster, each row naming its cluster (none for a single one)."""
    import pandas as pd

    from predictor.rightsize import rightsize

    tables: list[pd.DataFrame] = []
    runs: list[pd.DataFrame] = []
    notes: list[str] = []
    for name, source in inputs:
        table, ran = rightsize(source, rs)
        tables.append(with_cluster(table, name))
        runs.append(with_cluster(ran, name))
        notes.extend(note if name is None else f"cluster {name}: {note}" for note in source.notes)
    if len(tables) == 1:
        return tables[0], runs[0], notes
    return pd.concat(tables, ignore_index=True), pd.concat(runs, ignore_index=True), notes


def _demand_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs for the demand models: a workload of a named cluster is ``cluster/namespace`` so equal names in two
    clusters stay two workloads, and its queue is ``cluster/queue`` as in the queue hours."""
    from predictor.sources.clusters import qualify

    if CLUSTER_COLUMN not in runs.columns:
        return runs
    out = runs.copy()
    for column in ("namespace", "queue"):
        if column in out.columns:
            out[column] = [qualify(c, str(v)) for c, v in zip(out[CLUSTER_COLUMN], out[column], strict=True)]
    return out.drop(columns=[CLUSTER_COLUMN])


def _rs_with_sharing(rs: RightsizeSettings, sharing: list[float] | None) -> RightsizeSettings:
    sizes = tuple(sorted(set(sharing or ())))
    bad = [s for s in sizes if not 0 < s < 1]
    if bad:
        raise InputError(f"--sharing-size {bad[0]:g} must be a fraction between 0 and 1")
    return rs.model_copy(update={"sharing_sizes": sizes})


def rightsize_cmd(
    ctx: typer.Context,
    out: Annotated[Path, typer.Option("--out", help="Output CSV/Parquet, one row per workload.")],
    prometheus_url: PrometheusUrlOption = None,
    start: StartOpt = None,
    end: EndOpt = None,
    history: HistoryOrMetricsOption = None,
    step: StepOpt = "5m",
    sharing_size: SharingOpt = None,
    risk: Annotated[
        float,
        typer.Option(
            "--risk",
            help="Share of future runs allowed to need more than recommended (0 < R < 0.5; "
            "default 0.02: at most 1 run in 50 under-sized). Calibrated by conformal bounds on each workload's "
            "runs, pooled with similar workloads while its own history is short.",
        ),
    ] = 0.02,
    cluster: ClusterOpt = None,
) -> None:
    """Recommend GPUs and GPU memory per workload at a stated risk, from what its runs really used.

    With clusters in the settings, reads each (or each --cluster) and every row names its cluster."""
    from predictor.sources.files import write_frame

    settings = settings_from(ctx, prometheus={"url": prometheus_url})
    inputs, rs = _inputs(settings, prometheus_url, start, end, history, step, clusters=cluster)
    if not 0 < risk < 0.5:
        raise InputError(f"--risk {risk:g} must be between 0 and 0.5 (a share of runs, e.g. 0.02)")
    table, runs, notes = _rightsize_fleet(inputs, _rs_with_sharing(rs, sharing_size).model_copy(update={"risk": risk}))
    write_frame(table, out)
    for note in notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    idle = float((table["gpu_request"] - table["recommended_gpus"]).clip(lower=0).sum())
    console.print(
        f"wrote {len(table)} workloads ({len(runs)} runs) to {out}; {idle:g} requested GPUs recommended away",
        markup=False,
        highlight=False,
    )


def train_demand_cmd(
    ctx: typer.Context,
    prometheus_url: PrometheusUrlOption = None,
    start: StartOpt = None,
    end: EndOpt = None,
    history: HistoryOrMetricsOption = None,
    step: StepOpt = "5m",
    quantile: Annotated[float, typer.Option("--quantile", min=0.5, max=0.999, help="Quantile to predict.")] = 0.95,
    tracking_uri: TrackingUriOption = None,
    cluster: ClusterOpt = None,
) -> None:
    """Fit the demand regressors, backtest them against VPA/KRR, register gpu-demand, promote if better.

    Without --history, reads the configured Prometheus over --start/--end (default: the last 28 days);
    with clusters in the settings, every cluster's runs and queues (cluster/queue).
    """
    from pipelines.demand import DemandJob, train_demand

    settings = settings_from(ctx, prometheus={"url": prometheus_url}, mlflow={"tracking_uri": tracking_uri})
    inputs, rs = _inputs(settings, prometheus_url, start, end, history, step, scheduled=True, clusters=cluster)
    _, fleet_runs, _ = _rightsize_fleet(inputs, rs)
    runs = _demand_runs(fleet_runs)
    queues = None if history is not None else _queue_hours(settings, start, end, cluster)
    outcome = train_demand(settings, runs, DemandJob(quantile=quantile), queues=queues)
    verdict = "promoted to champion" if outcome.promoted else "kept as challenger"
    console.print(f"gpu-demand v{outcome.version}: {verdict} ({outcome.reason})", markup=False, highlight=False)
    console.print(f"queue-peak regressor (served by the loop): {outcome.queue_model}", markup=False, highlight=False)
    _print(outcome.table)


def _print(table: pd.DataFrame) -> None:
    from rich.table import Table

    out = Table(title="backtest on later runs")
    for column in table.columns:
        out.add_column(str(column), justify="left" if column == "method" else "right")
    for row in table.itertuples(index=False):
        out.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row))
    console.print(out)
