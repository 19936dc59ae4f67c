"""Crafted Ethernet frames for ``BPF_PROG_TEST_RUN``: how the datapath is tested and measured without NICs.

Katran keeps its packet builder in ``katran/lib/testing`` so that tests and benchmarks share one source of
truth; this module plays that role here for ``tests/bpf`` and ``bench/xdp.py`` (no command sends frames, so
it lives with the tests). Frames are packed with ``struct`` (no scapy dependency). Checksums are left zero:
XDP does not verify them.
"""

from __future__ import annotations

import socket
import struct

__all__ = [
    "XDP_ABORTED",
    "XDP_DROP",
    "XDP_PASS",
    "XDP_REDIRECT",
    "XDP_TX",
    "arp",
    "eth",
    "icmp4",
    "ipv4",
    "ipv6",
    "tcp",
    "udp",
]

XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_TX, XDP_REDIRECT = range(5)
SRC_MAC = bytes.fromhex("020000000001")
DST_MAC = bytes.fromhex("020000000002")


def udp(sport: int, dport: int, payload: bytes = b"x" * 18) -> tuple[int, bytes]:
    return socket.IPPROTO_UDP, struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


def tcp(sport: int, dport: int, payload: bytes = b"") -> tuple[int, bytes]:
    header = struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 0x02, 65535, 0, 0)  # a SYN
    return socket.IPPROTO_TCP, header + payload


def icmp4() -> tuple[int, bytes]:
    return socket.IPPROTO_ICMP, struct.pack("!BBHHH", 8, 0, 0, 1, 1) + b"ping"


def ipv4(
    src: str,
    dst: str,
    l4: tuple[int, bytes],
    *,
    options: bytes = b"",
    more_fragments: bool = False,
    frag_offset: int = 0,
) -> tuple[int, bytes]:
    """An IPv4 packet; ``options`` must be a multiple of 4 bytes (IHL counts 32-bit words)."""
    proto, payload = l4
    if len(options) % 4:
        raise ValueError("IPv4 options must be padded to 4 bytes")
    ihl = 5 + len(options) // 4
    flags_frag = (0x2000 if more_fragments else 0) | (frag_offset & 0x1FFF)
    header = struct.pack(
        "!BBHHHBBH4s4s",
        (4 << 4) | ihl,
        0,
        ihl * 4 + len(payload),
        0x1234,
        flags_frag,
        64,
        proto,
        0,
        socket.inet_aton(src),
        socket.inet_aton(dst),
    )
    return 0x0800, header + options + payload


def ipv6(
    src: str, dst: str, l4: tuple[int, bytes], *, hop_by_hop: bool = False, fragment: bool = False
) -> tuple[int, bytes]:
    """An IPv6 packet, optionally behind a hop-by-hop options header and/or a fragment header."""
    proto, payload = l4
    chain = payload
    nexthdr = proto
    if fragment:
        chain = struct.pack("!BBHI", nexthdr, 0, 1, 0xABCD) + chain  # offset 0, M=1
        nexthdr = 44
    if hop_by_hop:
        chain = struct.pack("!BB6s", nexthdr, 0, b"\x01\x04\x00\x00\x00\x00") + chain
        nexthdr = 0
    header = struct.pack(
        "!IHBB16s16s",
        6 << 28,
        len(chain),
        nexthdr,
        64,
        socket.inet_pton(socket.AF_INET6, src),
        socket.inet_pton(socket.AF_INET6, dst),
    )
    return 0x86DD, header + chain


def arp(sender: str = "192.0.2.1", target: str = "192.0.2.2") -> tuple[int, bytes]:
    body = struct.pack(
        "!HHBBH6s4s6s4s",
        1,
        0x0800,
        6,
        4,
        1,
        SRC_MAC,
        socket.inet_aton(sender),
        b"\0" * 6,
        socket.inet_aton(target),
    )
    return 0x0806, body


def eth(l3: tuple[int, bytes], *, vlans: tuple[int, ...] = (), pad_to: int = 60) -> bytes:
    """An Ethernet frame; ``vlans`` are 802.1Q VLAN ids, outermost first (802.1ad for the outer of two)."""
    ethertype, payload = l3
    tpids = [0x88A8 if len(vlans) == 2 and i == 0 else 0x8100 for i in range(len(vlans))]
    # The first TPID sits in the ethertype slot; each tag's last 2 bytes name what follows it.
    frame = DST_MAC + SRC_MAC + struct.pack("!H", tpids[0] if tpids else ethertype)
    for i, vid in enumerate(vlans):
        following = tpids[i + 1] if i + 1 < len(tpids) else ethertype
        frame += struct.pack("!HH", vid & 0x0FFF, following)
    frame += payload
    return frame + b"\0" * max(0, pad_to - len(frame))
