"""A stand-in for ``pynvml`` (nvidia-ml-py): a node of simulated H100s, for running ``predictor collect``.

Put this directory first on ``PYTHONPATH`` of a child process and ``PynvmlBackend.open()`` finds it
instead of the real bindings, so the whole exporter runs unchanged (NVML calls, HTTP server, scrapes)
on a machine without an NVIDIA driver. ``FAKE_NVML_GPUS`` sets the number of GPUs (default 8).
Readings change a little with every call, as a busy GPU's do.
"""

from __future__ import annotations

import itertools
import os
from types import SimpleNamespace
from typing import Any

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
nvmlEventTypeXidCriticalError = 8  # noqa: N816 - names as in the real module

_MIB = 1024 * 1024
_ticks = itertools.count()
_initialised = False


class NVMLError(Exception):
    pass


class NVMLError_Timeout(NVMLError):  # noqa: N801, N818 - names as in the real module
    pass


def _count() -> int:
    return int(os.environ.get("FAKE_NVML_GPUS", "8"))


def _check() -> None:
    if not _initialised:
        raise NVMLError("Uninitialized")


def nvmlInit() -> None:
    global _initialised
    _initialised = True


def nvmlShutdown() -> None:
    global _initialised
    _initialised = False


def nvmlSystemGetDriverVersion() -> str:
    return "550.54.15"


def nvmlDeviceGetCount() -> int:
    _check()
    return _count()


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    _check()
    if not 0 <= index < _count():
        raise NVMLError("Invalid Argument")
    return index


def nvmlDeviceGetUUID(handle: int) -> str:
    return f"GPU-{handle:08x}-fake-0000-0000-000000000000"


def nvmlDeviceGetName(handle: int) -> str:
    return "NVIDIA H100 80GB HBM3"


def nvmlDeviceGetPciInfo(handle: int) -> Any:
    return SimpleNamespace(busId=f"00000000:{0x18 + handle:02X}:00.0")


def nvmlDeviceGetUtilizationRates(handle: int) -> Any:
    tick = next(_ticks)
    return SimpleNamespace(gpu=(37 * tick + 11 * handle) % 101, memory=(13 * tick + handle) % 60)


def nvmlDeviceGetMemoryInfo(handle: int) -> Any:
    used = (20_000 + 500 * handle) * _MIB
    return SimpleNamespace(used=used, free=81_559 * _MIB - used, reserved=559 * _MIB)


def nvmlDeviceGetCurrentClocksEventReasons(handle: int) -> int:
    return 0


def nvmlDeviceGetPowerUsage(handle: int) -> int:
    return 300_000 + 1_000 * handle


def nvmlDeviceGetTotalEnergyConsumption(handle: int) -> int:
    return 9_000_000_000 + next(_ticks) * 1_000


def nvmlDeviceGetTemperature(handle: int, sensor: int) -> int:
    return 60 + handle


def nvmlDeviceGetClockInfo(handle: int, clock: int) -> int:
    return 1980 if clock == NVML_CLOCK_SM else 2619


def nvmlDeviceGetPcieReplayCounter(handle: int) -> int:
    return 0


def nvmlEventSetCreate() -> object:
    return object()


def nvmlDeviceRegisterEvents(handle: int, events: int, event_set: object) -> None:
    return None


def nvmlEventSetWait_v2(event_set: object, timeout_ms: int) -> Any:
    raise NVMLError_Timeout("Timeout")


def nvmlEventSetFree(event_set: object) -> None:
    return None
