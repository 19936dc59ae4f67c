"""``predictor collect``: DCGM-compatible GPU metrics read through NVML, for nodes without dcgm-exporter.

Same metric names, units and labels as dcgm-exporter (``gpu, UUID, pci_bus_id, device, modelName,
Hostname, DCGM_FI_DRIVER_VERSION``), so every query in this project works on either. Readings are taken
at scrape time by a custom collector on an injected ``CollectorRegistry`` (never the global one); only
XID events are polled between scrapes, because NVML reports them as events, not as a value to read.
DCGM counters without a ``_total`` suffix are exposed untyped: prometheus_client would otherwise rename
them, and the names are the contract.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from predictor.sources.nvml import GpuIdentity, GpuReading, NvmlBackend

__all__ = ["NvmlCollector", "build_registry", "print_once", "serve"]

_MIB = 1024 * 1024
# (metric, type, help, reading → DCGM unit)
_FIELDS: list[tuple[str, str, str, str, float]] = [
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "gpu_util_pct", 1.0),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", "mem_copy_util_pct", 1.0),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", "fb_used_bytes", 1 / _MIB),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", "fb_free_bytes", 1 / _MIB),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).", "fb_reserved_bytes", 1 / _MIB),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "power_mw", 1e-3),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "unknown",
        "Total energy consumption since boot (in mJ).",
        "energy_mj",
        1.0,
    ),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", "temperature_c", 1.0),
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", "sm_clock_mhz", 1.0),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", "mem_clock_mhz", 1.0),
    (
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "gauge",
        "Current clock throttle reasons (bitmask).",
        "throttle_reasons",
        1.0,
    ),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "unknown", "Total number of PCIe retries.", "pcie_replays", 1.0),
]


class NvmlCollector(Collector):
    """A prometheus_client collector reading every GPU of ``backend`` at scrape time."""

    def __init__(self, backend: NvmlBackend, hostname: str | None = None) -> None:
        self.backend = backend
        self.hostname = hostname or socket.gethostname()
        self._devices: list[GpuIdentity] = backend.devices()
        self._driver = backend.driver_version()
        self._last_xid: dict[int, int] = {}
        self._lock = threading.Lock()

    def poll_xid(self) -> None:
        """Remember the last XID of each GPU (DCGM_FI_DEV_XID_ERRORS is the value of the last XID)."""
        events = self.backend.xid_events()
        with self._lock:
            for index, xid in events:
                self._last_xid[index] = xid

    def _labels(self, gpu: GpuIdentity) -> dict[str, str]:
        return {
            "gpu": str(gpu.index),
            "UUID": gpu.uuid,
            "pci_bus_id": gpu.pci_bus_id,
            "device": f"nvidia{gpu.index}",
            "modelName": gpu.model_name,
            "Hostname": self.hostname,
            "DCGM_FI_DRIVER_VERSION": self._driver,
        }

    def collect(self) -> Iterator[Metric]:
        self.poll_xid()
        readings: list[tuple[GpuIdentity, GpuReading]] = [(g, self.backend.read(g.index)) for g in self._devices]
        for name, kind, help_, field, scale in _FIELDS:
            metric = Metric(name, help_, kind)
            for gpu, reading in readings:
                value = getattr(reading, field)
                if value is not None:
                    metric.add_sample(name, self._labels(gpu), float(value) * scale)
            if metric.samples:
                yield metric
        xid = Metric("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", "gauge")
        with self._lock:
            for gpu in self._devices:
                xid.add_sample("DCGM_FI_DEV_XID_ERRORS", self._labels(gpu), float(self._last_xid.get(gpu.index, 0)))
        yield xid


def build_registry(backend: NvmlBackend, hostname: str | None = None) -> tuple[CollectorRegistry, NvmlCollector]:
    registry = CollectorRegistry(auto_describe=False)
    collector = NvmlCollector(backend, hostname)
    registry.register(collector)
    return registry, collector


def print_once(backend: NvmlBackend, hostname: str | None = None) -> str:
    """One scrape in the Prometheus text format."""
    registry, _ = build_registry(backend, hostname)
    return generate_latest(registry).decode()


def serve(
    backend: NvmlBackend,
    *,
    port: int,
    address: str = "0.0.0.0",  # noqa: S104
    interval_s: float = 15.0,
    stop: threading.Event | None = None,
) -> None:
    """Serve ``/metrics`` until ``stop`` is set (forever by default), polling XID events every interval."""
    registry, collector = build_registry(backend)
    server, thread = start_http_server(port, addr=address, registry=registry)
    stop = stop or threading.Event()
    try:
        while not stop.wait(interval_s):
            collector.poll_xid()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        backend.close()
