"""``predictor export``: a PromQL range query written as a long frame file (CSV or Parquet).

The file it writes is what every ``--history FILE`` option of the other commands reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from predictor.commands._common import console, settings_from
from predictor.commands._fleet import ClusterOpt, fleet, with_cluster
from predictor.commands._options import PrometheusUrlOption
from predictor.errors import InputError
from predictor.sources.files import SUFFIXES, write_frame
from predictor.timeparse import parse_duration, parse_time

if TYPE_CHECKING:
    import pandas as pd

    from predictor.config import Settings

__all__ = ["export"]


def export(
    ctx: typer.Context,
    query: Annotated[str, typer.Option("--query", help="PromQL expression to evaluate over the range.")],
    start: Annotated[str, typer.Option("--start", help="Range start, ISO 8601 (naive = UTC).")],
    end: Annotated[str, typer.Option("--end", help="Range end, ISO 8601 (naive = UTC).")],
    out: Annotated[Path, typer.Option("--out", help="Output file: .csv or .parquet.")],
    step: Annotated[str, typer.Option("--step", help="Evaluation step, e.g. 30s, 1m, 1h.")] = "1m",
    prometheus_url: PrometheusUrlOption = None,
    retries: Annotated[
        int | None, typer.Option("--retries", help="Retries of transient failures (overrides config).")
    ] = None,
    timeout: Annotated[float | None, typer.Option("--timeout", help="Per-request timeout in seconds.")] = None,
    cluster: ClusterOpt = None,
) -> None:
    """Export a PromQL range query as a long frame (series_id, timestamp, value, labels).

    With clusters in the settings, the query runs in each cluster (or each --cluster): rows carry a
    "cluster" column and series ids are cluster/<id>.
    """
    if out.suffix.lower() not in SUFFIXES:
        raise InputError(f"--out {out}: unknown file extension {out.suffix!r} (use .csv or .parquet)")
    start_at = parse_time(start, name="--start")
    end_at = parse_time(end, name="--end")
    if end_at < start_at:
        raise InputError(f"--end {end} is before --start {start}")
    step_td = parse_duration(step, name="--step")
    settings = settings_from(ctx, prometheus={"url": prometheus_url, "retries": retries, "timeout_s": timeout})
    frame = _fleet_frame(settings, cluster, query, start_at, end_at, step_td)
    write_frame(frame, out)
    console.print(
        f"wrote {len(frame):,} samples of {frame['series_id'].nunique():,} series to {out}",
        highlight=False,
    )


def _fleet_frame(
    settings: Settings, only: list[str] | None, query: str, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta
) -> pd.DataFrame:
    """The query's answer in every cluster, one frame (today's frame unchanged when no clusters are listed)."""
    import pandas as pd

    parts = []
    for cluster in fleet(settings, only):
        frame = cluster.source.query_range(query, start, end, step)
        if cluster.name is not None:
            frame = with_cluster(frame.assign(series_id=frame["series_id"].map(cluster.qualify)), cluster.name)
        parts.append(frame)
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
