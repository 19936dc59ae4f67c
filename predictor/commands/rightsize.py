"""CLI: ``predictor rightsize`` and ``predictor train demand``.

Thin by design (STYLE §13): pick the source (a Prometheus range or a history file), build settings, call
``predictor.rightsize`` or ``pipelines.demand``, write atomically and print one line per outcome. Heavy
imports (pandas, scikit-learn, mlflow) happen inside the commands so ``predictor --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from predictor.commands._common import console, settings_from
from predictor.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

    from predictor.config import Settings
    from predictor.rightsize import RightsizeInput, RightsizeSettings

__all__ = ["register"]

DEFAULT_WINDOW_DAYS = 28
UrlOpt = Annotated[str | None, typer.Option("--prometheus-url", help="Prometheus base URL to read history from.")]
StartOpt = Annotated[str | None, typer.Option("--start", help="Start of the history window (ISO 8601).")]
EndOpt = Annotated[str | None, typer.Option("--end", help="End of the history window (ISO 8601).")]
HistoryOpt = Annotated[
    Path | None, typer.Option("--history", help="Long CSV/Parquet file, or the simulator's metrics/ directory.")
]
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
) -> tuple[RightsizeInput, RightsizeSettings]:
    """Where the runs come from. ``scheduled`` (train demand in a CronJob) falls back to the configured
    Prometheus and the last ``DEFAULT_WINDOW_DAYS`` ending now, so the job needs no per-run flags."""
    import pandas as pd

    from predictor.rightsize import RightsizeSettings, from_history, from_source
    from predictor.sources import PrometheusSource
    from predictor.timeparse import parse_duration, parse_time

    step_td = parse_duration(step, name="--step")
    rs = RightsizeSettings(step_s=int(step_td.total_seconds()))
    if history is not None and url is not None:
        raise InputError("give either --history FILE or --prometheus-url URL, not both")
    if history is not None:
        return from_history(history), rs
    if url is None and not scheduled:
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
    return from_source(PrometheusSource(settings.prometheus), t0, t1, step_td), rs


def _queue_hours(settings: Settings, start: str | None, end: str | None) -> pd.DataFrame | None:
    """Hourly ``series_id, timestamp, demand, pending`` per queue from Prometheus, by the loop's own queries.

    The queue-peak regressor is served on ``QUEUE_DEMAND`` and ``QUEUE_PENDING`` (``predictor.loop.demand``),
    so it is trained on them too; ``None`` (fall back to the runs' hourly requests) when Prometheus has no
    queue demand series over the window.
    """
    import pandas as pd

    from predictor.sources import PrometheusSource
    from predictor.sources.queries import QUEUE_DEMAND, QUEUE_LABEL, QUEUE_PENDING
    from predictor.timeparse import parse_time

    t1 = parse_time(end, name="--end") if end else pd.Timestamp.now(tz="UTC").floor("min")
    t0 = parse_time(start, name="--start") if start else t1 - pd.Timedelta(days=DEFAULT_WINDOW_DAYS)
    source, hour = PrometheusSource(settings.prometheus), pd.Timedelta(hours=1)
    parts = []
    for query, column in ((QUEUE_DEMAND, "demand"), (QUEUE_PENDING, "pending")):
        frame = source.query_range(query, t0, t1, hour)
        if frame.empty or QUEUE_LABEL not in frame.columns:
            continue
        parts.append(pd.DataFrame({"series_id": frame[QUEUE_LABEL].astype(str), "timestamp": frame["timestamp"],
                                   column: pd.to_numeric(frame["value"], errors="coerce")}))
    if not parts or "demand" not in parts[0].columns:
        return None
    out = parts[0]
    if len(parts) > 1:
        out = out.merge(parts[1], on=["series_id", "timestamp"], how="left")
    return out.reset_index(drop=True)


def _rs_with_sharing(rs: RightsizeSettings, sharing: list[float] | None) -> RightsizeSettings:
    sizes = tuple(sorted(set(sharing or ())))
    bad = [s for s in sizes if not 0 < s < 1]
    if bad:
        raise InputError(f"--sharing-size {bad[0]:g} must be a fraction between 0 and 1")
    return rs.model_copy(update={"sharing_sizes": sizes})


def register(app: typer.Typer, train: typer.Typer) -> None:
    """Add ``rightsize`` to the root app and ``demand`` to the ``train`` group."""

    @app.command("rightsize")
    def rightsize_cmd(
        ctx: typer.Context,
        out: Annotated[Path, typer.Option("--out", help="Output CSV/Parquet, one row per workload.")],
        prometheus_url: UrlOpt = None,
        start: StartOpt = None,
        end: EndOpt = None,
        history: HistoryOpt = None,
        step: StepOpt = "5m",
        sharing_size: SharingOpt = None,
        risk: Annotated[float, typer.Option(
            "--risk", help="Share of future runs allowed to need more than recommended (0 < R < 0.5; "
            "default 0.02: at most 1 run in 50 under-sized). Calibrated by conformal bounds on each workload's "
            "runs, pooled with similar workloads while its own history is short.")] = 0.02,
    ) -> None:
        """Recommend GPUs and GPU memory per workload at a stated risk, from what its runs really used."""
        from predictor.rightsize import rightsize
        from predictor.sources.files import write_frame

        settings = settings_from(ctx, prometheus={"url": prometheus_url})
        inputs, rs = _inputs(settings, prometheus_url, start, end, history, step)
        if not 0 < risk < 0.5:
            raise InputError(f"--risk {risk:g} must be between 0 and 0.5 (a share of runs, e.g. 0.02)")
        table, runs = rightsize(inputs, _rs_with_sharing(rs, sharing_size).model_copy(update={"risk": risk}))
        write_frame(table, out)
        for note in inputs.notes:
            console.print(f"note: {note}", markup=False, highlight=False)
        idle = float((table["gpu_request"] - table["recommended_gpus"]).clip(lower=0).sum())
        console.print(
            f"wrote {len(table)} workloads ({len(runs)} runs) to {out}; {idle:g} requested GPUs recommended away",
            markup=False, highlight=False,
        )

    @train.command("demand")
    def train_demand_cmd(
        ctx: typer.Context,
        prometheus_url: UrlOpt = None,
        start: StartOpt = None,
        end: EndOpt = None,
        history: HistoryOpt = None,
        step: StepOpt = "5m",
        quantile: Annotated[float, typer.Option("--quantile", min=0.5, max=0.999, help="Quantile to predict.")] = 0.95,
        tracking_uri: Annotated[
            str | None, typer.Option("--tracking-uri", help="MLflow tracking URI (overrides settings).")
        ] = None,
    ) -> None:
        """Fit the demand regressors, backtest them against VPA/KRR, register gpu-demand, promote if better.

        Without --history, reads the configured Prometheus over --start/--end (default: the last 28 days).
        """
        from pipelines.demand import DemandJob, train_demand
        from predictor.rightsize import rightsize

        settings = settings_from(ctx, prometheus={"url": prometheus_url}, mlflow={"tracking_uri": tracking_uri})
        inputs, rs = _inputs(settings, prometheus_url, start, end, history, step, scheduled=True)
        _, runs = rightsize(inputs, rs)
        queues = None if history is not None else _queue_hours(settings, start, end)
        outcome = train_demand(settings, runs, DemandJob(quantile=quantile), queues=queues)
        verdict = "promoted to champion" if outcome.promoted else "kept as challenger"
        console.print(f"gpu-demand v{outcome.version}: {verdict} ({outcome.reason})", markup=False, highlight=False)
        console.print(f"queue-peak regressor (served by the loop): {outcome.queue_model}", markup=False,
                      highlight=False)
        _print(outcome.table)


def _print(table: pd.DataFrame) -> None:
    from rich.table import Table

    out = Table(title="backtest on later runs")
    for column in table.columns:
        out.add_column(str(column), justify="left" if column == "method" else "right")
    for row in table.itertuples(index=False):
        out.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row))
    console.print(out)
