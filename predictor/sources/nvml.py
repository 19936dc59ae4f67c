"""GPU readings through NVML, behind a small Protocol so the DCGM-name mapping is testable without a GPU.

``PynvmlBackend`` is the only code that touches ``pynvml``; it turns every NVML failure into the project's
errors (no driver → ``EnvironmentUnsupportedError``) and an unsupported field into ``None``, which the
collector leaves out, as dcgm-exporter does. Tests inject a fake backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from predictor.errors import DataSourceError, EnvironmentUnsupportedError

__all__ = ["GpuIdentity", "GpuReading", "NvmlBackend", "PynvmlBackend"]


@dataclass(frozen=True)
class GpuIdentity:
    index: int
    uuid: str
    model_name: str
    pci_bus_id: str


@dataclass(frozen=True)
class GpuReading:
    """One poll of one GPU in NVML's units; ``None`` where the GPU does not support the field."""

    gpu_util_pct: float | None = None
    mem_copy_util_pct: float | None = None
    fb_used_bytes: float | None = None
    fb_free_bytes: float | None = None
    fb_reserved_bytes: float | None = None
    power_mw: float | None = None
    energy_mj: float | None = None
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    throttle_reasons: int | None = None
    pcie_replays: float | None = None


class NvmlBackend(Protocol):
    """What the collector needs from NVML."""

    def driver_version(self) -> str: ...

    def devices(self) -> list[GpuIdentity]: ...

    def read(self, index: int) -> GpuReading: ...

    def xid_events(self) -> list[tuple[int, int]]:
        """``(gpu index, XID)`` pairs seen since the last call; never blocks."""
        ...

    def close(self) -> None: ...


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class PynvmlBackend:
    """NVML through ``pynvml`` (nvidia-ml-py). Build it with ``open()``."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        self._events: Any = None
        try:
            self._events = nvml.nvmlEventSetCreate()
            for handle in self._handles:
                nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, self._events)
        except nvml.NVMLError:
            self._events = None  # XID events are not reported on this GPU/driver: no XID metric

    @classmethod
    def open(cls) -> PynvmlBackend:
        """Initialise NVML; without an NVIDIA driver raise ``EnvironmentUnsupportedError``."""
        try:
            import pynvml
        except ImportError as exc:  # pragma: no cover - nvidia-ml-py is a dependency
            raise EnvironmentUnsupportedError("pynvml (nvidia-ml-py) is not installed") from exc
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise EnvironmentUnsupportedError(
                f"no NVIDIA driver: NVML could not be initialised ({exc}); run on a GPU node, or use dcgm-exporter"
            ) from exc
        try:
            return cls(pynvml)
        except pynvml.NVMLError as exc:
            raise DataSourceError(f"NVML failed listing GPUs: {exc}") from exc

    def _get(self, call: str, *args: Any) -> Any:
        try:
            return getattr(self._nvml, call)(*args)
        except (self._nvml.NVMLError, AttributeError):
            return None  # unsupported on this GPU or driver: the metric is left out

    def driver_version(self) -> str:
        return _text(self._get("nvmlSystemGetDriverVersion") or "")

    def devices(self) -> list[GpuIdentity]:
        out = []
        for i, handle in enumerate(self._handles):
            pci = self._get("nvmlDeviceGetPciInfo", handle)
            out.append(
                GpuIdentity(
                    index=i,
                    uuid=_text(self._get("nvmlDeviceGetUUID", handle) or ""),
                    model_name=_text(self._get("nvmlDeviceGetName", handle) or ""),
                    pci_bus_id=_text(getattr(pci, "busId", "")) if pci is not None else "",
                )
            )
        return out

    def read(self, index: int) -> GpuReading:
        nvml, handle = self._nvml, self._handles[index]
        util = self._get("nvmlDeviceGetUtilizationRates", handle)
        mem = self._get("nvmlDeviceGetMemoryInfo", handle)
        reasons = self._get("nvmlDeviceGetCurrentClocksEventReasons", handle)
        if reasons is None:
            reasons = self._get("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        return GpuReading(
            gpu_util_pct=getattr(util, "gpu", None),
            mem_copy_util_pct=getattr(util, "memory", None),
            fb_used_bytes=getattr(mem, "used", None),
            fb_free_bytes=getattr(mem, "free", None),
            fb_reserved_bytes=getattr(mem, "reserved", None),
            power_mw=self._get("nvmlDeviceGetPowerUsage", handle),
            energy_mj=self._get("nvmlDeviceGetTotalEnergyConsumption", handle),
            temperature_c=self._get("nvmlDeviceGetTemperature", handle, nvml.NVML_TEMPERATURE_GPU),
            sm_clock_mhz=self._get("nvmlDeviceGetClockInfo", handle, nvml.NVML_CLOCK_SM),
            mem_clock_mhz=self._get("nvmlDeviceGetClockInfo", handle, nvml.NVML_CLOCK_MEM),
            throttle_reasons=reasons,
            pcie_replays=self._get("nvmlDeviceGetPcieReplayCounter", handle),
        )

    def xid_events(self) -> list[tuple[int, int]]:
        if self._events is None:
            return []
        nvml = self._nvml
        seen: list[tuple[int, int]] = []
        while True:
            try:
                event = nvml.nvmlEventSetWait_v2(self._events, 0)
            except nvml.NVMLError_Timeout:
                return seen
            except nvml.NVMLError:
                return seen
            handle = getattr(event, "device", None)
            index = next((i for i, h in enumerate(self._handles) if h == handle), -1)
            if index >= 0:
                seen.append((index, int(event.eventData)))

    def close(self) -> None:
        if self._events is not None:
            self._get("nvmlEventSetFree", self._events)
        self._get("nvmlShutdown")
