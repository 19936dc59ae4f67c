"""``predictor export``: a PromQL range query written as a long frame file (CSV or Parquet).

The file it writes is what every ``--history FILE`` option of the other commands reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from predictor.commands._common import console, settings_from
from predictor.errors import InputError
from predictor.sources.files import SUFFIXES, write_frame
from predictor.sources.prometheus import PrometheusSource
from predictor.timeparse import parse_duration, parse_time

__all__ = ["register"]


def register(app: typer.Typer, train: typer.Typer) -> None:
    @app.command()
    def export(
        ctx: typer.Context,
        query: Annotated[str, typer.Option("--query", help="PromQL expression to evaluate over the range.")],
        start: Annotated[str, typer.Option("--start", help="Range start, ISO 8601 (naive = UTC).")],
        end: Annotated[str, typer.Option("--end", help="Range end, ISO 8601 (naive = UTC).")],
        out: Annotated[Path, typer.Option("--out", help="Output file: .csv or .parquet.")],
        step: Annotated[str, typer.Option("--step", help="Evaluation step, e.g. 30s, 1m, 1h.")] = "1m",
        prometheus_url: Annotated[
            str | None, typer.Option("--prometheus-url", help="Prometheus base URL (overrides config).")
        ] = None,
        retries: Annotated[
            int | None, typer.Option("--retries", help="Retries of transient failures (overrides config).")
        ] = None,
        timeout: Annotated[
            float | None, typer.Option("--timeout", help="Per-request timeout in seconds.")
        ] = None,
    ) -> None:
        """Export a PromQL range query as a long frame (series_id, timestamp, value, labels)."""
        if out.suffix.lower() not in SUFFIXES:
            raise InputError(f"--out {out}: unknown file extension {out.suffix!r} (use .csv or .parquet)")
        start_at = parse_time(start, name="--start")
        end_at = parse_time(end, name="--end")
        if end_at < start_at:
            raise InputError(f"--end {end} is before --start {start}")
        step_td = parse_duration(step, name="--step")
        settings = settings_from(
            ctx, prometheus={"url": prometheus_url, "retries": retries, "timeout_s": timeout}
        )
        frame = PrometheusSource(settings.prometheus).query_range(query, start_at, end_at, step_td)
        write_frame(frame, out)
        console.print(
            f"wrote {len(frame):,} samples of {frame['series_id'].nunique():,} series to {out}",
            highlight=False,
        )
