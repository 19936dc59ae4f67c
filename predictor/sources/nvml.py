"""GPU readings through NVML, behind a small Protocol so the DCGM-name mapping is testable without a GPU.

``PynvmlBackend`` is the only code that touches ``pynvml``; it turns every NVML failure into the project's
errors (no driver → ``EnvironmentUnsupportedError``) and an unsupported field into ``None``, which the
collector leaves out, as dcgm-exporter does. Tests inject a fake backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from predictor.errors import DataSourceError, EnvironmentUnsupportedError

__all__ = ["GpuIdentity", "GpuReading", "MigIdentity", "NvmlBackend", "PynvmlBackend"]


@dataclass(frozen=True)
class GpuIdentity:
    index: int
    uuid: str
    model_name: str
    pci_bus_id: str


@dataclass(frozen=True)
class MigIdentity:
    """One MIG device of a GPU: its slot on the parent (``index``), UUID and GPU instance.

    ``profile`` is dcgm-exporter's ``GPU_I_PROFILE`` (``1g.10gb``); ``uuid`` is what the kubelet lists for
    ``nvidia.com/mig-*`` resources.
    """

    parent: int
    index: int
    uuid: str
    gpu_instance_id: int
    compute_instance_id: int
    profile: str


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

    def mig_devices(self, index: int) -> list[MigIdentity]:
        """The MIG devices of GPU ``index`` now; empty when MIG is off or unsupported."""
        ...

    def read_mig(self, index: int, mig_index: int) -> GpuReading:
        """One MIG device; device-wide fields (power, clocks) are ``None``, as NVML reports them."""
        ...

    def xid_events(self) -> list[tuple[int, int]]:
        """``(gpu index, XID)`` pairs seen since the last call; never blocks."""
        ...

    def close(self) -> None: ...


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def mig_profile(name: str) -> str:
    """``NVIDIA H100 80GB HBM3 MIG 1g.10gb`` → ``1g.10gb`` (NVML names a MIG device after its profile)."""
    _, sep, tail = name.rpartition("MIG ")
    return tail.strip() if sep else ""


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
        return self._read(self._handles[index])

    def _mig_handle(self, index: int, mig_index: int) -> Any:
        return self._get("nvmlDeviceGetMigDeviceHandleByIndex", self._handles[index], mig_index)

    def mig_devices(self, index: int) -> list[MigIdentity]:
        handle = self._handles[index]
        mode = self._get("nvmlDeviceGetMigMode", handle)
        if not mode or mode[0] != getattr(self._nvml, "NVML_DEVICE_MIG_ENABLE", 1):
            return []
        out = []
        for slot in range(self._get("nvmlDeviceGetMaxMigDeviceCount", handle) or 0):
            mig = self._mig_handle(index, slot)
            if mig is None:
                continue  # an empty slot: NVML answers NOT_FOUND
            out.append(
                MigIdentity(
                    parent=index,
                    index=slot,
                    uuid=_text(self._get("nvmlDeviceGetUUID", mig) or ""),
                    gpu_instance_id=int(self._get("nvmlDeviceGetGpuInstanceId", mig) or 0),
                    compute_instance_id=int(self._get("nvmlDeviceGetComputeInstanceId", mig) or 0),
                    profile=mig_profile(_text(self._get("nvmlDeviceGetName", mig) or "")),
                )
            )
        return out

    def read_mig(self, index: int, mig_index: int) -> GpuReading:
        # Per MIG device NVML reports memory; utilisation rates are NOT_SUPPORTED on the drivers seen so
        # far (then None, left out). Power, temperature and clocks belong to the parent GPU's series.
        mig = self._mig_handle(index, mig_index)
        if mig is None:
            return GpuReading()
        util = self._get("nvmlDeviceGetUtilizationRates", mig)
        mem = self._get("nvmlDeviceGetMemoryInfo", mig)
        return GpuReading(
            gpu_util_pct=getattr(util, "gpu", None),
            mem_copy_util_pct=getattr(util, "memory", None),
            fb_used_bytes=getattr(mem, "used", None),
            fb_free_bytes=getattr(mem, "free", None),
            fb_reserved_bytes=getattr(mem, "reserved", None),
        )

    def _read(self, handle: Any) -> GpuReading:
        nvml = self._nvml
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
