"""``predictor collect``: the NVML exporter the node-agent DaemonSet runs on every GPU node.

Its own module because what it imports is what the agent container pays for in memory: typer, rich,
prometheus_client and pynvml, never pandas or the ML stack (a test pins the import closure).
"""

from __future__ import annotations

from typing import Annotated

import typer

from predictor.commands._common import console
from predictor.timeparse import parse_seconds

__all__ = ["collect"]


def collect(
    port: Annotated[int, typer.Option("--port", help="Port of the /metrics endpoint.")] = 9400,
    address: Annotated[str, typer.Option("--address", help="Listen address.")] = "0.0.0.0",  # noqa: S104
    interval: Annotated[str, typer.Option("--interval", help="How often NVML is read.")] = "15s",
    once: Annotated[bool, typer.Option("--once", help="Print one scrape to stdout and exit.")] = False,
) -> None:
    """Serve DCGM-compatible GPU metrics read through NVML (for nodes without dcgm-exporter)."""
    from predictor.collect import print_once, serve
    from predictor.sources.nvml import PynvmlBackend

    interval_s = parse_seconds(interval, name="--interval")
    backend = PynvmlBackend.open()
    if once:
        # Plain echo, not rich: the exposition format must not be wrapped at the terminal width.
        typer.echo(print_once(backend), nl=False)
        return
    console.print(f"serving NVML metrics on http://{address}:{port}/metrics")
    serve(backend, port=port, address=address, interval_s=interval_s)
