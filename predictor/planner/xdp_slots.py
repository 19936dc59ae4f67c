"""Slot-table maths for the XDP load balancer: weights → slots, minimal-movement rebuilds, flow hashing.

The datapath steers a flow to ``table[hash % n_slots]``. How the table is rebuilt decides how many live
flows a profile switch moves: rebuilding from scratch moves most of them, while keeping every slot whose
owner still has quota moves exactly the total-variation distance between the old and new shares
(Katran's Maglev-delta idea). ``flow_hash`` mirrors ``bpf/xdp_lb.c`` bit for bit so
tests and the bench can predict where a flow goes ("KatranSimulator").

Pure arithmetic, so it sits in the planner's layer: the profile policy (``xdp_profiles``) apportions
weights and measures churn with it, and the actuator builds the kernel tables from it; neither the
planner nor this module imports an actuator.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence

__all__ = [
    "LUT_SIZE",
    "apportion",
    "build_table",
    "flow_hash",
    "moved_fraction",
    "rebalance",
    "shares",
    "total_variation",
]

LUT_SIZE = 256  # must equal LB_LUT_SIZE in bpf/xdp_lb.h
_MASK = 0xFFFFFFFF


def apportion(weights: Sequence[int], n_slots: int = LUT_SIZE) -> list[int]:
    """Slot counts proportional to ``weights`` (largest remainder; ties go to the lower index)."""
    total = sum(weights)
    if total <= 0 or any(w < 0 for w in weights):
        raise ValueError("weights must be non-negative with a positive sum")
    exact = [w * n_slots / total for w in weights]
    counts = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: n_slots - sum(counts)]:
        counts[i] += 1
    return counts


def _smooth_order(counts: Sequence[int], n: int) -> list[int]:
    # Smooth weighted round robin (nginx): interleaves owners so neighbouring slots differ.
    current = [0] * len(counts)
    total = sum(counts)
    k = len(counts)
    out: list[int] = []
    for _ in range(n):
        best = 0
        for i in range(k):
            current[i] += counts[i]
            if current[i] > current[best]:  # strict: ties go to the lower index
                best = i
        current[best] -= total
        out.append(best)
    return out


def build_table(weights: Sequence[int], n_slots: int = LUT_SIZE) -> list[int]:
    """A fresh slot table (slot → target index) for ``weights``."""
    return _smooth_order(apportion(weights, n_slots), n_slots)


def rebalance(current: Sequence[int], weights: Sequence[int], n_slots: int = LUT_SIZE) -> list[int]:
    """The table for ``weights`` that differs from ``current`` in as few slots as possible.

    Every slot keeps its owner while that owner is under its new quota; only the surplus slots are
    handed, interleaved, to the targets that lack slots. With an unusable ``current`` (wrong size or an
    unknown target) this is ``build_table``.
    """
    wanted = apportion(weights, n_slots)
    if len(current) != n_slots or min(current) < 0 or max(current) >= len(weights):
        return build_table(weights, n_slots)
    kept = [0] * len(weights)
    table: list[int | None] = []
    for owner in current:
        if kept[owner] < wanted[owner]:
            kept[owner] += 1
            table.append(owner)
        else:
            table.append(None)
    deficit = [w - k for w, k in zip(wanted, kept, strict=True)]
    fill = iter(_smooth_order(deficit, sum(deficit))) if sum(deficit) else iter(())
    return [t if t is not None else next(fill) for t in table]


def shares(weights: Sequence[int]) -> list[float]:
    total = sum(weights)
    return [w / total for w in weights] if total else [0.0] * len(weights)


def total_variation(a: Sequence[int], b: Sequence[int]) -> float:
    """Total-variation distance of two weight vectors: the least fraction of flows a switch must move."""
    pa, pb = shares(a), shares(b)
    return 0.5 * sum(abs(x - y) for x, y in zip(pa, pb, strict=True))


def moved_fraction(old: Sequence[int], new: Sequence[int]) -> float:
    """Fraction of slots (hence of uniformly hashed flows) whose target differs."""
    if len(old) != len(new) or not old:
        return 1.0
    return sum(1 for x, y in zip(old, new, strict=True) if x != y) / len(old)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def _mix(h: int, k: int) -> int:
    k = (k * 0xCC9E2D51) & _MASK
    k = _rotl(k, 15)
    k = (k * 0x1B873593) & _MASK
    h ^= k
    h = _rotl(h, 13)
    return (h * 5 + 0xE6546B64) & _MASK


def _fmix(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    h ^= h >> 16
    return h


def _addr_words(addr: str) -> tuple[int, int, int, int, int]:
    # The datapath loads addresses as little-endian u32 words of the network-order bytes.
    if ":" in addr:
        return (6, *struct.unpack("<4I", socket.inet_pton(socket.AF_INET6, addr)))
    (word,) = struct.unpack("<I", socket.inet_aton(addr))
    return (4, word, 0, 0, 0)


def flow_hash(src: str, dst: str, proto: int, sport: int = 0, dport: int = 0, *, seed: int) -> int:
    """The datapath's 5-tuple hash (pass ports 0 for a fragment, which is hashed on L3 only).

    ``seed`` is the loaded program's ``lb_seed`` (``XdpActuator.hash_seed()``), drawn at random per load.
    """
    family, *s = _addr_words(src)
    _, *d = _addr_words(dst)
    h = seed & _MASK
    for word in (*s, *d):
        h = _mix(h, word)
    h = _mix(h, ((sport & 0xFFFF) << 16) | (dport & 0xFFFF))
    h = _mix(h, (family << 8) | proto)
    return _fmix(h)
