"""The XDP datapath in the real kernel through BPF_PROG_TEST_RUN: steering, parsing and the pass rules."""

from __future__ import annotations

import errno
import os
import random

import pytest

from predictor.actuators import xdp
from predictor.actuators.xdp import STAT_OBSERVED, STAT_PASSED, STAT_UNPARSED, XdpActuator
from tests.support.xdp_frames import (
    XDP_PASS,
    XDP_REDIRECT,
    arp,
    eth,
    icmp4,
    ipv4,
    ipv6,
    tcp,
    udp,
)
from predictor.actuators.xdp_libbpf import BpfCallError, Libbpf
from predictor.planner.xdp_slots import flow_hash
from predictor.planner.xdp_types import Profile

pytestmark = pytest.mark.root

Lb = tuple[XdpActuator, int]
NEIGHBOUR_SOLICIT = b"\x87\0\0\0" + b"\0" * 20


def decide(lib: Libbpf, act: XdpActuator, fd: int, frame: bytes) -> tuple[int, int | None, list[int]]:
    """(XDP action, chosen target or None, per-slot packet deltas) for one frame."""
    before = [p for p, _ in act.counters()]
    retval = lib.test_run(fd, frame).retval
    delta = [p - q for p, q in zip((p for p, _ in act.counters()), before, strict=True)]
    chosen = [i for i in range(xdp.MAX_TARGETS) if delta[i]]
    return retval, (chosen[0] if chosen else None), delta


def profile(weights: list[int], targets: list[str], **kw: bool) -> Profile:
    return Profile(name="p" + "-".join(map(str, weights)), weights=dict(zip(targets, weights, strict=True)), **kw)


def udp4(sport: int, dport: int = 80, src: str = "198.51.100.7", dst: str = "192.0.2.10") -> bytes:
    return eth(ipv4(src, dst, udp(sport, dport)))


def test_no_profile_passes_everything(lb: Lb, lib: Libbpf) -> None:
    act, fd = lb
    retval, target, delta = decide(lib, act, fd, udp4(1000))
    assert (retval, target) == (XDP_PASS, None)
    assert delta[STAT_PASSED] == 1


def test_distribution_follows_weights_and_flows_are_sticky(lb: Lb, lib: Libbpf, dummies: tuple) -> None:
    act, fd = lb
    targets = dummies[1]
    act.set_profile(profile([1, 1, 2, 0], targets))
    rng = random.Random(7)
    flows = [(f"198.51.100.{rng.randrange(1, 255)}", rng.randrange(1024, 65535)) for _ in range(4000)]
    counts = [0] * 4
    table, seed = act.table().slots, act.hash_seed()
    for src, sport in flows:
        retval, target, _ = decide(lib, act, fd, udp4(sport, src=src))
        assert retval == XDP_REDIRECT and target is not None
        counts[target] += 1
        # The Python model of the hash, given this load's seed, predicts the kernel's choice exactly.
        assert target == table[flow_hash(src, "192.0.2.10", 17, sport, 80, seed=seed) % len(table)]
    shares = [c / len(flows) for c in counts]
    assert shares == pytest.approx([0.25, 0.25, 0.5, 0.0], abs=0.03)
    for src, sport in flows[:200]:  # same flow, same target, every time
        first = decide(lib, act, fd, udp4(sport, src=src))[1]
        assert all(decide(lib, act, fd, udp4(sport, src=src))[1] == first for _ in range(3))


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(eth(ipv4("198.51.100.1", "192.0.2.10", tcp(40000, 443))), id="ipv4-tcp"),
        pytest.param(eth(ipv4("198.51.100.1", "192.0.2.10", udp(40000, 53), options=b"\x01" * 8)), id="ipv4-opts"),
        pytest.param(eth(ipv4("198.51.100.1", "192.0.2.10", udp(1, 2)), vlans=(100,)), id="vlan"),
        pytest.param(eth(ipv4("198.51.100.1", "192.0.2.10", udp(1, 2)), vlans=(100, 200)), id="qinq"),
        pytest.param(eth(ipv6("2001:db8::1", "2001:db8::2", tcp(40000, 443))), id="ipv6-tcp"),
        pytest.param(eth(ipv6("2001:db8::1", "2001:db8::2", udp(5, 6), hop_by_hop=True)), id="ipv6-hbh"),
    ],
)
def test_steered_frames(lb: Lb, lib: Libbpf, dummies: tuple, frame: bytes) -> None:
    act, fd = lb
    act.set_profile(profile([1, 1, 1, 1], dummies[1]))
    retval, target, _ = decide(lib, act, fd, frame)
    assert retval == XDP_REDIRECT and target is not None


def test_fragments_hash_on_l3_only(lb: Lb, lib: Libbpf, dummies: tuple) -> None:
    act, fd = lb
    act.set_profile(profile([1, 1, 1, 1], dummies[1]))
    table = act.table().slots
    for i in range(50):
        src = f"198.51.100.{i + 1}"
        first = eth(ipv4(src, "192.0.2.10", udp(1000 + i, 80), more_fragments=True))
        later = eth(ipv4(src, "192.0.2.10", (17, b"y" * 40), frag_offset=3))
        r1, t1, _ = decide(lib, act, fd, first)
        r2, t2, _ = decide(lib, act, fd, later)
        assert r1 == r2 == XDP_REDIRECT
        assert t1 == t2 == table[flow_hash(src, "192.0.2.10", 17, seed=act.hash_seed()) % len(table)]
    v6 = eth(ipv6("2001:db8::1", "2001:db8::2", udp(7, 8), fragment=True))
    assert decide(lib, act, fd, v6)[0] == XDP_REDIRECT


@pytest.mark.parametrize(
    ("frame", "counter"),
    [
        pytest.param(eth(arp()), STAT_PASSED, id="arp"),
        pytest.param(eth(ipv4("198.51.100.1", "192.0.2.10", icmp4())), STAT_PASSED, id="icmp"),
        pytest.param(eth(ipv6("2001:db8::1", "2001:db8::2", (58, NEIGHBOUR_SOLICIT))), STAT_PASSED, id="icmpv6-nd"),
        # BPF_PROG_TEST_RUN refuses frames under 14 bytes (as no NIC delivers them): header only.
        pytest.param(eth((0x0800, b""), pad_to=0), STAT_UNPARSED, id="ethernet-header-only"),
        pytest.param(eth(ipv4("198.51.100.1", "192.0.2.10", udp(1, 2)), pad_to=0)[:24], STAT_UNPARSED, id="cut-ip"),
        pytest.param(eth(ipv4("198.51.100.1", "192.0.2.10", tcp(1, 2)), pad_to=0)[:40], STAT_UNPARSED, id="cut-tcp"),
        pytest.param(eth(ipv6("2001:db8::1", "2001:db8::2", udp(1, 2)), pad_to=0)[:50], STAT_UNPARSED, id="cut-ipv6"),
        pytest.param(
            eth(ipv4("198.51.100.1", "192.0.2.10", udp(1, 2), options=b"\0" * 40), pad_to=0)[:40],
            STAT_UNPARSED,
            id="options-past-end",
        ),
        pytest.param(eth((0x0800, b"\x43" + b"\0" * 30)), STAT_UNPARSED, id="ihl-below-5"),
        pytest.param(eth(ipv4("198.51.100.1", "192.0.2.10", udp(1, 2)), vlans=(1, 2, 3)), STAT_UNPARSED, id="3-vlans"),
    ],
)
def test_not_steered_frames_are_passed(lb: Lb, lib: Libbpf, dummies: tuple, frame: bytes, counter: int) -> None:
    act, fd = lb
    act.set_profile(profile([1, 1, 1, 1], dummies[1]))
    retval, target, delta = decide(lib, act, fd, frame)
    assert (retval, target) == (XDP_PASS, None)
    assert delta[counter] == 1


def test_garbage_is_never_dropped(lb: Lb, lib: Libbpf, dummies: tuple) -> None:
    act, fd = lb
    act.set_profile(profile([1, 1, 1, 1], dummies[1]))
    rng = random.Random(11)
    for _ in range(500):
        frame = bytes(rng.randrange(256) for _ in range(rng.randrange(14, 120)))
        assert lib.test_run(fd, frame).retval in (XDP_PASS, XDP_REDIRECT)


def test_observe_mode_counts_the_decision_and_passes(lb: Lb, lib: Libbpf, dummies: tuple) -> None:
    act, fd = lb
    act.set_profile(profile([1, 0, 0, 0], dummies[1], observe=True))
    retval, target, delta = decide(lib, act, fd, udp4(4242))
    assert (retval, target) == (XDP_PASS, 0)
    assert delta[STAT_OBSERVED] == 1
    assert act.status().observe is True


def test_switch_moves_only_what_the_weights_move(lb: Lb, lib: Libbpf, dummies: tuple) -> None:
    act, fd = lb
    targets = dummies[1]
    act.set_profile(profile([1, 1, 1, 1], targets))
    sports = range(2000, 4000)
    before = [decide(lib, act, fd, udp4(s))[1] for s in sports]
    act.set_profile(profile([1, 1, 1, 2], targets))
    after = [decide(lib, act, fd, udp4(s))[1] for s in sports]
    moved = sum(1 for a, b in zip(before, after, strict=True) if a != b) / len(before)
    assert moved == pytest.approx(0.15, abs=0.04)  # total-variation distance of 1:1:1:1 → 1:1:1:2
    assert all(b == 3 for a, b in zip(before, after, strict=True) if a != b)


def test_sticky_profile_keeps_flows_but_not_on_drained_targets(lb: Lb, lib: Libbpf, dummies: tuple) -> None:
    act, fd = lb
    targets = dummies[1]
    act.set_profile(profile([1, 1, 1, 1], targets, sticky=True))
    sports = range(5000, 5400)
    before = [decide(lib, act, fd, udp4(s))[1] for s in sports]
    act.set_profile(Profile(name="skew", weights={targets[0]: 1, targets[1]: 5, targets[2]: 1}, sticky=True))
    after = [decide(lib, act, fd, udp4(s))[1] for s in sports]
    for a, b in zip(before, after, strict=True):
        assert b != 3  # a drained target loses even its sticky flows
        if a != 3:
            assert b == a  # every other established flow stays put


def test_upgrade_keeps_maps_and_rejects_a_stale_swap(lb: Lb, lib: Libbpf, dummies: tuple, bpf_objects: dict) -> None:
    act, fd = lb
    act.set_profile(profile([1, 2, 0, 0], dummies[1]))
    old_id, seed = act.status().prog_id, act.hash_seed()
    before = [decide(lib, act, fd, udp4(s))[1] for s in range(6000, 6300)]
    new_id = act.upgrade(bpf_objects["lb"])
    status = act.status()
    assert new_id != old_id and status.prog_id == new_id
    assert status.weights[dummies[1][1]] == 2  # the live profile survived the upgrade
    assert act.hash_seed() == seed  # so did the seed: within one load, every flow keeps its target
    new_fd = lib.obj_get(act.pin_dir / "prog")
    try:
        assert [decide(lib, act, new_fd, udp4(s))[1] for s in range(6000, 6300)] == before
    finally:
        os.close(new_fd)
    # A compare-and-swap that expects the replaced program fails (EPERM → retryable error).
    link = lib.obj_get(act.pin_dir / "link")
    try:
        with pytest.raises(BpfCallError) as info:
            lib.link_update(link, fd, fd)  # fd is the original program, no longer attached
        assert info.value.errno == errno.EPERM
    finally:
        os.close(link)


def test_plan_apply_is_dry_by_default_and_idempotent(lb: Lb, lib: Libbpf, dummies: tuple) -> None:
    act, _ = lb
    changes = act.plan(profile([1, 3, 0, 0], dummies[1]))
    assert len(changes) == 1 and changes[0].after["weights"][dummies[1][1]] == 3
    assert act.apply(changes) == changes  # dry run: reported, not done
    assert act.status().active_profile is None
    assert act.apply(changes, dry_run=False) == changes
    active = act.active_index()
    assert act.apply(changes, dry_run=False) == []  # the same plan again is a no-op: no flip
    assert act.active_index() == active
    assert act.plan(profile([1, 3, 0, 0], dummies[1])) == []
