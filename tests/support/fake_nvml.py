"""``predictor collect`` without a GPU: an injected NVML backend (two H100s, MIG devices on demand) and
the real ``serve`` loop on a loopback port.

The second GPU lacks energy and throttle support, so tests see how unsupported fields are left out.
"""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from predictor.collect import Owners, serve
from predictor.sources.nvml import GpuIdentity, GpuReading, MigIdentity
from tests.support.localprom import free_port

__all__ = ["FakeNvml", "scrape", "serving"]


class FakeNvml:
    """An injected NVML backend: two H100s, the second without energy or throttle support."""

    def __init__(self) -> None:
        self.xids: list[tuple[int, int]] = []
        self.closed = False
        # GPU index -> its MIG devices (none: MIG off), and what each reads as (MIG UUID -> reading)
        self.migs: dict[int, list[MigIdentity]] = {}
        self.mig_readings: dict[str, GpuReading] = {}

    def driver_version(self) -> str:
        return "550.54.15"

    def devices(self) -> list[GpuIdentity]:
        return [
            GpuIdentity(0, "GPU-aaaa", "NVIDIA H100 80GB HBM3", "00000000:18:00.0"),
            GpuIdentity(1, "GPU-bbbb", "NVIDIA H100 80GB HBM3", "00000000:2A:00.0"),
        ]

    def read(self, index: int) -> GpuReading:
        if index == 0:
            return GpuReading(
                gpu_util_pct=87,
                mem_copy_util_pct=30,
                fb_used_bytes=40_000 * 2**20,
                fb_free_bytes=41_000 * 2**20,
                fb_reserved_bytes=559 * 2**20,
                power_mw=612_500,
                energy_mj=9e9,
                temperature_c=71,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                throttle_reasons=0x20,
                pcie_replays=3,
            )
        return GpuReading(
            gpu_util_pct=0,
            fb_used_bytes=0,
            fb_free_bytes=81_000 * 2**20,
            power_mw=70_000,
            temperature_c=33,
            sm_clock_mhz=345,
        )

    def mig_devices(self, index: int) -> list[MigIdentity]:
        return list(self.migs.get(index, []))

    def read_mig(self, index: int, mig_index: int) -> GpuReading:
        mig = next(m for m in self.migs[index] if m.index == mig_index)
        return self.mig_readings.get(mig.uuid, GpuReading())

    def xid_events(self) -> list[tuple[int, int]]:
        seen, self.xids = self.xids, []
        return seen

    def close(self) -> None:
        self.closed = True


def scrape(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
        return str(response.read().decode())


@contextmanager
def serving(backend: FakeNvml, owners: Owners | None = None) -> Iterator[str]:
    """``predictor collect``'s server on 127.0.0.1 in a thread; yields its base URL once it answers."""
    port = free_port()
    stop = threading.Event()
    thread = threading.Thread(
        target=serve,
        args=(backend,),
        kwargs={"port": port, "address": "127.0.0.1", "interval_s": 0.05, "stop": stop, "owners": owners},
    )
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                scrape(url)
                break
            except OSError:
                threading.Event().wait(0.05)
        yield url
    finally:
        stop.set()
        thread.join(timeout=10)
