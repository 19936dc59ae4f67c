"""``predictor collect``: DCGM-compatible GPU metrics read through NVML, for nodes without dcgm-exporter.

Same metric names, units and labels as dcgm-exporter (``gpu, UUID, pci_bus_id, device, modelName,
Hostname, DCGM_FI_DRIVER_VERSION``), so every query in this project works on either. As dcgm-exporter in
Kubernetes mode, a GPU held by a container also carries ``namespace, pod, container`` (from the kubelet's
pod-resources API, read at every scrape), and each MIG device is a series of its own with ``GPU_I_ID`` and
``GPU_I_PROFILE`` next to its parent GPU's labels. Readings are taken
at scrape time by a custom collector on an injected ``CollectorRegistry`` (never the global one); only
XID events are polled between scrapes, because NVML reports them as events, not as a value to read.
DCGM counters without a ``_total`` suffix are exposed untyped: prometheus_client would otherwise rename
them, and the names are the contract.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from predictor.sources.nvml import GpuIdentity, GpuReading, MigIdentity, NvmlBackend
from predictor.sources.podresources import PodRef

# Device ID (GPU or MIG UUID, or GPU index) → the container the kubelet assigned it to.
Owners = Callable[[], Mapping[str, PodRef]]

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
    """A prometheus_client collector reading every GPU (and MIG device) of ``backend`` at scrape time."""

    def __init__(self, backend: NvmlBackend, hostname: str | None = None, owners: Owners | None = None) -> None:
        self.backend = backend
        self.hostname = hostname or socket.gethostname()
        self.owners = owners
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

    def _labels(self, gpu: GpuIdentity, owner: PodRef | None) -> dict[str, str]:
        labels = {
            "gpu": str(gpu.index),
            "UUID": gpu.uuid,
            "pci_bus_id": gpu.pci_bus_id,
            "device": f"nvidia{gpu.index}",
            "modelName": gpu.model_name,
            "Hostname": self.hostname,
            "DCGM_FI_DRIVER_VERSION": self._driver,
        }
        # A free GPU has no pod labels at all, as from dcgm-exporter (PromQL reads absent as "").
        return (labels | owner.labels()) if owner else labels

    def _series(self, owners: Mapping[str, PodRef]) -> list[tuple[dict[str, str], GpuReading]]:
        """Labels and reading of every GPU, then of every MIG device (one per GPU instance)."""
        out = []
        for gpu in self._devices:
            out.append((self._labels(gpu, _gpu_owner(owners, gpu)), self.backend.read(gpu.index)))
            seen: set[int] = set()
            for mig in self.backend.mig_devices(gpu.index):
                if mig.gpu_instance_id in seen:
                    continue  # compute instances share their GPU instance's memory: one series per instance
                seen.add(mig.gpu_instance_id)
                labels = self._labels(gpu, _mig_owner(owners, gpu, mig)) | {
                    "GPU_I_PROFILE": mig.profile,
                    "GPU_I_ID": str(mig.gpu_instance_id),
                }
                out.append((labels, self.backend.read_mig(gpu.index, mig.index)))
        return out

    def collect(self) -> Iterator[Metric]:
        self.poll_xid()
        owners = self.owners() if self.owners else {}
        series = self._series(owners)
        for name, kind, help_, field, scale in _FIELDS:
            metric = Metric(name, help_, kind)
            for labels, reading in series:
                value = getattr(reading, field)
                if value is not None:
                    metric.add_sample(name, labels, float(value) * scale)
            if metric.samples:
                yield metric
        xid = Metric("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", "gauge")
        with self._lock:
            for gpu in self._devices:
                value = float(self._last_xid.get(gpu.index, 0))
                xid.add_sample("DCGM_FI_DEV_XID_ERRORS", self._labels(gpu, _gpu_owner(owners, gpu)), value)
        yield xid


def _gpu_owner(owners: Mapping[str, PodRef], gpu: GpuIdentity) -> PodRef | None:
    # The device plugin lists GPUs by UUID, or by index under its ``index`` device ID strategy.
    return owners.get(gpu.uuid) or owners.get(str(gpu.index))


def _mig_owner(owners: Mapping[str, PodRef], gpu: GpuIdentity, mig: MigIdentity) -> PodRef | None:
    # Device plugins list MIG devices by MIG UUID; old ones by ``MIG-<GPU UUID>/<GI>/<CI>``.
    legacy = f"MIG-{gpu.uuid}/{mig.gpu_instance_id}/{mig.compute_instance_id}"
    return owners.get(mig.uuid) or owners.get(legacy)


def build_registry(
    backend: NvmlBackend, hostname: str | None = None, owners: Owners | None = None
) -> tuple[CollectorRegistry, NvmlCollector]:
    registry = CollectorRegistry(auto_describe=False)
    collector = NvmlCollector(backend, hostname, owners)
    registry.register(collector)
    return registry, collector


def print_once(backend: NvmlBackend, hostname: str | None = None, owners: Owners | None = None) -> str:
    """One scrape in the Prometheus text format."""
    registry, _ = build_registry(backend, hostname, owners)
    return generate_latest(registry).decode()


def serve(
    backend: NvmlBackend,
    *,
    port: int,
    address: str = "0.0.0.0",  # noqa: S104
    interval_s: float = 15.0,
    stop: threading.Event | None = None,
    owners: Owners | None = None,
) -> None:
    """Serve ``/metrics`` until ``stop`` is set (forever by default), polling XID events every interval.

    ``owners`` (e.g. ``DeviceOwners(socket)``) is asked at every scrape; without it GPUs have no pod labels.
    """
    registry, collector = build_registry(backend, owners=owners)
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
