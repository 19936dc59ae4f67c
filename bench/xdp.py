"""Benchmark of the XDP load balancer in the real kernel (needs root).

Prints three tables:
1. ns per packet from BPF_PROG_TEST_RUN with ``repeat`` for the LB program and, in the same run, a
   trivial pass-all program (the ratio is the LB's cost over the bare XDP hook);
2. fraction of flows a profile switch moves, measured through the kernel, against the ideal (the
   total-variation distance of the weights) and against a naive table rebuild;
3. switch latency: the one-word flip alone and the full plan + write-inactive + flip.

Usage, from the repository root (needs root and a kernel that loads BPF programs):
    sudo .venv/bin/python -m bench.xdp [--repeat 200000] [--flows 5000] [--switches 500]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from predictor.actuators import xdp
from predictor.actuators.xdp_libbpf import Libbpf
from predictor.planner.xdp_slots import build_table, moved_fraction, total_variation
from predictor.planner.xdp_types import Profile
from tests.support.xdp_frames import arp, eth, ipv4, ipv6, tcp, udp

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def environment(n_targets: int) -> Iterator[tuple[Path, str, list[str]]]:
    """A private bpffs and veth interfaces, removed afterwards."""
    tag = uuid.uuid4().hex[:5]
    front, targets = f"gcpx{tag}bi", [f"gcpx{tag}b{i}" for i in range(n_targets)]
    mnt = Path(tempfile.mkdtemp(prefix="gcpx-bench-"))
    subprocess.run(["mount", "-t", "bpf", "bpf", str(mnt)], check=True)
    made: list[str] = []
    try:
        for name in (front, *targets):
            subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name", f"{name}p"], check=True)
            made.append(name)
            subprocess.run(["ip", "link", "set", name, "up"], check=True)
        yield mnt, front, targets
    finally:
        for name in made:
            subprocess.run(["ip", "link", "del", name], check=False)
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        shutil.rmtree(mnt, ignore_errors=True)


def ns_per_packet(lib: Libbpf, fd: int, frame: bytes, repeat: int, rounds: int) -> float:
    return statistics.median(lib.test_run(fd, frame, repeat=repeat).duration_ns for _ in range(rounds))


def bench_cost(lib: Libbpf, act: xdp.XdpActuator, pass_fd: int, repeat: int) -> list[tuple[str, float, float]]:
    fd = lib.obj_get(act.pin_dir / "prog")
    frames = {
        "IPv4/UDP": eth(ipv4("198.51.100.1", "192.0.2.1", udp(40000, 80))),
        "IPv4/TCP + options": eth(ipv4("198.51.100.1", "192.0.2.1", tcp(40000, 443), options=b"\x01" * 8)),
        "802.1Q IPv4/UDP": eth(ipv4("198.51.100.1", "192.0.2.1", udp(1, 2)), vlans=(100,)),
        "IPv6/TCP": eth(ipv6("2001:db8::1", "2001:db8::2", tcp(40000, 443))),
        "ARP (passed)": eth(arp()),
    }
    rows = []
    try:
        for name, frame in frames.items():
            lb = ns_per_packet(lib, fd, frame, repeat, 5)
            base = ns_per_packet(lib, pass_fd, frame, repeat, 5)
            rows.append((name, lb, base))
    finally:
        os.close(fd)
    return rows


def measured_moves(
    lib: Libbpf, act: xdp.XdpActuator, targets: list[str], old: list[int], new: list[int], flows: int
) -> float:
    """Send ``flows`` distinct UDP flows through the kernel before and after the switch; count moves."""
    fd = lib.obj_get(act.pin_dir / "prog")

    def route_all() -> list[int]:
        out = []
        for i in range(flows):
            frame = eth(ipv4(f"198.51.100.{1 + i % 200}", "192.0.2.1", udp(1024 + i // 200, 80)))
            before = act.counters()
            lib.test_run(fd, frame)
            after = act.counters()
            out.append(next(k for k in range(len(targets)) if after[k][0] != before[k][0]))
        return out

    try:
        act.set_profile(Profile(name="old", weights=dict(zip(targets, old, strict=False))))
        first = route_all()
        act.set_profile(Profile(name="new", weights=dict(zip(targets, new, strict=False))))
        second = route_all()
    finally:
        os.close(fd)
    return sum(1 for a, b in zip(first, second, strict=True) if a != b) / flows


def bench_switch(act: xdp.XdpActuator, targets: list[str], n: int) -> tuple[list[int], list[int]]:
    a = Profile(name="a", weights={targets[0]: 1, targets[1]: 1, targets[2]: 1, targets[3]: 1})
    b = Profile(name="b", weights={targets[0]: 1, targets[1]: 3, targets[2]: 1, targets[3]: 0})
    flips, full = [], []
    for i in range(n):
        start = time.perf_counter_ns()
        act.set_profile(b if i % 2 else a)
        full.append(time.perf_counter_ns() - start)
        assert act.last_switch_ns is not None
        flips.append(act.last_switch_ns)
    return flips, full


def pct(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200_000, help="BPF_PROG_TEST_RUN repetitions")
    parser.add_argument("--flows", type=int, default=5000, help="flows per switch scenario")
    parser.add_argument("--switches", type=int, default=500, help="profile switches timed")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("python -m bench.xdp needs root (it loads XDP programs); run it as root", file=sys.stderr)
        return 2
    lib = Libbpf()
    with environment(4) as (mnt, front, targets):
        act = xdp.load(front, targets, mnt / "lb", mode="skb", lib=lib)
        pass_obj = lib.open_object(REPO / "bpf" / "build" / "xdp_pass.o")
        try:
            pass_obj.load()
            act.set_profile(Profile(name="even", weights=dict.fromkeys(targets, 1)))
            cost = bench_cost(lib, act, pass_obj.prog_fd("xdp_pass_all"), args.repeat)
            print(f"## Cost per packet (BPF_PROG_TEST_RUN, repeat={args.repeat}, median of 5, {os.cpu_count()} CPUs)")
            print("| frame | LB ns/pkt | pass-all ns/pkt | ratio |\n|---|---:|---:|---:|")
            for name, lb, base in cost:
                print(f"| {name} | {lb:.1f} | {base:.1f} | {lb / base:.2f}x |")

            print(f"\n## Flows moved by a switch ({args.flows} UDP flows through the kernel)")
            print("| switch | measured | ideal (TV distance) | naive rebuild (slot diff) |\n|---|---:|---:|---:|")
            for old, new in [
                ([1, 1, 1, 1], [1, 1, 1, 2]),
                ([1, 1, 1, 1], [1, 1, 1, 0]),
                ([2, 1, 0, 0], [1, 2, 0, 0]),
                ([1, 1, 2, 0], [3, 1, 0, 0]),
            ]:
                moved = measured_moves(lib, act, targets, old, new, args.flows)
                naive = moved_fraction(build_table(old), build_table(new))
                label = f"{':'.join(map(str, old))} → {':'.join(map(str, new))}"
                print(f"| {label} | {moved:.3f} | {total_variation(old, new):.3f} | {naive:.3f} |")

            flips, full = bench_switch(act, targets, args.switches)
            print(f"\n## Switch latency ({args.switches} switches)")
            print("| step | p50 µs | p99 µs |\n|---|---:|---:|")
            print(f"| flip lb_active (one u32 map update) | {pct(flips, 0.5):.1f} | {pct(flips, 0.99):.1f} |")
            label = "full set-profile (read, plan, write inactive, flip)"
            print(f"| {label} | {pct(full, 0.5):.1f} | {pct(full, 0.99):.1f} |")
        finally:
            pass_obj.close()
            act.unload()
    return 0


if __name__ == "__main__":
    sys.exit(main())
