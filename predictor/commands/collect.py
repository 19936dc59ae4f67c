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
    pod_resources_socket: Annotated[
        str | None,
        typer.Option(
            "--pod-resources-socket",
            help="The kubelet's pod-resources socket, to label GPUs with namespace/pod/container "
            '(default /var/lib/kubelet/pod-resources/kubelet.sock; "" for no pod labels).',
        ),
    ] = None,
) -> None:
    """Serve DCGM-compatible GPU metrics read through NVML (for nodes without dcgm-exporter)."""
    import logging

    from predictor.collect import print_once, serve
    from predictor.sources.nvml import PynvmlBackend
    from predictor.sources.podresources import DEFAULT_SOCKET, DeviceOwners

    interval_s = parse_seconds(interval, name="--interval")
    backend = PynvmlBackend.open()
    # A node agent's log is its stderr: say where pod labels come from, or why there are none.
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    socket_path = DEFAULT_SOCKET if pod_resources_socket is None else pod_resources_socket
    owners = DeviceOwners(socket_path) if socket_path else None
    if once:
        # Plain echo, not rich: the exposition format must not be wrapped at the terminal width.
        typer.echo(print_once(backend, owners=owners), nl=False)
        return
    console.print(f"serving NVML metrics on http://{address}:{port}/metrics")
    serve(backend, port=port, address=address, interval_s=interval_s, owners=owners)
