"""Map layouts of the XDP load balancer, mirrored from ``bpf/xdp_lb.h``.

Kept apart from the actuator so the one place that must change with the C structs is small and obvious
(``tests/bpf`` asserts the sizes). All values are little-endian, as the kernel stores them on x86-64.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from predictor.planner.xdp_slots import LUT_SIZE

__all__ = [
    "COUNTER",
    "F_OBSERVE",
    "F_STICKY",
    "LEGACY_SEED",
    "LUT",
    "MAPS",
    "MAX_TARGETS",
    "PROG",
    "SEED_MAP",
    "STAT_OBSERVED",
    "STAT_PASSED",
    "STAT_UNPARSED",
    "U32",
    "Table",
]

MAX_TARGETS = 16  # LB_MAX_TARGETS in bpf/xdp_lb.h
NAME_LEN = 32
F_OBSERVE, F_STICKY = 0x1, 0x2
STAT_PASSED, STAT_UNPARSED, STAT_OBSERVED = MAX_TARGETS, MAX_TARGETS + 1, MAX_TARGETS + 2
LUT = struct.Struct(f"<II{MAX_TARGETS}I{NAME_LEN}s{LUT_SIZE}I")  # struct lut
COUNTER = struct.Struct("<QQ")  # struct counter, one per possible CPU
SEED_MAP = "lb_seed"  # one u32: the flow-hash seed, drawn per load (bpf/xdp_lb.c)
LEGACY_SEED = 0x9747B28C  # LB_LEGACY_SEED: the fixed seed of builds before per-load seeds
MAPS = ("lb_luts", "lb_active", "lb_targets", "lb_stats", "lb_flows", SEED_MAP)
PROG = "xdp_lb"
U32 = struct.Struct("<I")


@dataclass(frozen=True)
class Table:
    """One entry of ``lb_luts``: a profile as the kernel sees it."""

    name: str
    flags: int
    weights: tuple[int, ...]
    slots: tuple[int, ...]

    def pack(self) -> bytes:
        weights = list(self.weights) + [0] * (MAX_TARGETS - len(self.weights))
        slots = list(self.slots) + [0] * (LUT_SIZE - len(self.slots))
        return LUT.pack(self.flags, len(self.slots), *weights, self.name.encode(), *slots)

    @classmethod
    def unpack(cls, raw: bytes) -> Table:
        fields = LUT.unpack(raw[: LUT.size])
        flags, n_slots = fields[0], min(fields[1], LUT_SIZE)
        weights = tuple(fields[2 : 2 + MAX_TARGETS])
        name = fields[2 + MAX_TARGETS].split(b"\0", 1)[0].decode(errors="replace")
        slots = tuple(fields[3 + MAX_TARGETS : 3 + MAX_TARGETS + n_slots])
        return cls(name, flags, weights, slots)
