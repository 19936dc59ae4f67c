"""``PynvmlBackend`` enumerates MIG devices the way NVML presents them.

No GPU here, so the NVML calls are answered by a stand-in for the ``pynvml`` module with the answers NVML
documents: the MIG mode as ``[current, pending]``, empty slots as NOT_FOUND errors, MIG device names ending
in their profile, utilisation NOT_SUPPORTED on a MIG handle.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from predictor.sources.nvml import GpuReading, MigIdentity, PynvmlBackend, mig_profile


class NVMLError(Exception):
    pass


class _Nvml:
    """GPU 0 in MIG mode with slots 0 and 2 used (slot 1 empty); GPU 1 with MIG off."""

    NVMLError = NVMLError
    NVMLError_Timeout = NVMLError
    NVML_DEVICE_MIG_ENABLE = 1

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> tuple[str, int]:
        return ("gpu", index)

    def nvmlEventSetCreate(self) -> Any:
        raise NVMLError("Not Supported")

    def nvmlDeviceGetMigMode(self, handle: tuple[str, int]) -> list[int]:
        return [1, 1] if handle == ("gpu", 0) else [0, 0]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: tuple[str, int]) -> int:
        return 3

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: tuple[str, int], slot: int) -> tuple[str, int]:
        if handle != ("gpu", 0) or slot == 1:
            raise NVMLError("Not Found")
        return ("mig", slot)

    def nvmlDeviceGetUUID(self, handle: tuple[str, int]) -> bytes:
        return f"MIG-{handle[1]}aaa".encode() if handle[0] == "mig" else b"GPU-aaaa"

    def nvmlDeviceGetGpuInstanceId(self, handle: tuple[str, int]) -> int:
        return {0: 7, 2: 2}[handle[1]]

    def nvmlDeviceGetComputeInstanceId(self, handle: tuple[str, int]) -> int:
        return 0

    def nvmlDeviceGetName(self, handle: tuple[str, int]) -> str:
        return "NVIDIA H100 80GB HBM3 MIG 1g.10gb" if handle == ("mig", 0) else "NVIDIA H100 80GB HBM3 MIG 3g.40gb"

    def nvmlDeviceGetMemoryInfo(self, handle: tuple[str, int]) -> Any:
        return SimpleNamespace(used=1024 * 2**20, free=2048 * 2**20, reserved=0)

    def nvmlDeviceGetUtilizationRates(self, handle: tuple[str, int]) -> Any:
        if handle[0] == "mig":
            raise NVMLError("Not Supported")
        return SimpleNamespace(gpu=50, memory=10)


def test_mig_devices_skip_empty_slots_and_name_their_instance_and_profile() -> None:
    backend = PynvmlBackend(_Nvml())
    assert backend.mig_devices(0) == [
        MigIdentity(parent=0, index=0, uuid="MIG-0aaa", gpu_instance_id=7, compute_instance_id=0, profile="1g.10gb"),
        MigIdentity(parent=0, index=2, uuid="MIG-2aaa", gpu_instance_id=2, compute_instance_id=0, profile="3g.40gb"),
    ]
    assert backend.mig_devices(1) == []  # MIG off


def test_a_mig_device_reads_its_memory_and_no_unsupported_field() -> None:
    reading = PynvmlBackend(_Nvml()).read_mig(0, 2)
    assert reading == GpuReading(fb_used_bytes=1024 * 2**20, fb_free_bytes=2048 * 2**20, fb_reserved_bytes=0)


def test_profile_is_the_tail_of_the_mig_device_name() -> None:
    assert mig_profile("NVIDIA A100-SXM4-40GB MIG 2g.10gb") == "2g.10gb"
    assert mig_profile("NVIDIA H100 80GB HBM3") == ""
