"""Fixtures that own real kernel resources for the XDP tests: built objects, a private bpffs, interfaces
and network namespaces. Everything is named ``gcpx<id>…`` so parallel runs do not collide, and torn down
in the fixture even when a test fails.

Tests that need root or a BPF-capable kernel skip with the reason; CI runs them as root.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from predictor.actuators import xdp
from predictor.actuators.xdp import XdpActuator
from predictor.actuators.xdp_libbpf import Libbpf, setns_net
from predictor.errors import PredictorError

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "bpf" / "build"


def _need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to load XDP programs (CI runs these as root)")


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=20)


@pytest.fixture(scope="session")
def bpf_objects() -> dict[str, Path]:
    """``make -C bpf`` once per session; skip when the toolchain or the kernel is missing."""
    _need_root()
    if shutil.which("clang") is None:
        pytest.skip("clang is not installed (apt-get install clang llvm libbpf-dev)")
    proc = subprocess.run(["make", "-C", str(REPO / "bpf")], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"make -C bpf failed:\n{proc.stdout}\n{proc.stderr}")
    return {"lb": BUILD / "xdp_lb.o", "pass": BUILD / "xdp_pass.o"}


@pytest.fixture(scope="session")
def lib(bpf_objects: dict[str, Path]) -> Libbpf:
    try:
        lib = Libbpf()
        obj = lib.open_object(bpf_objects["pass"])
        try:
            obj.load()
        finally:
            obj.close()
    except PredictorError as exc:
        pytest.skip(f"the kernel refuses BPF programs here: {exc}")
    return lib


@pytest.fixture
def bpffs(tmp_path: Path) -> Iterator[Path]:
    """A private bpffs instance (each mount is a fresh one), unmounted after the test."""
    _need_root()
    mnt = tmp_path / "bpffs"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "bpf", "bpf", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount bpffs: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def uid() -> str:
    return uuid.uuid4().hex[:5]


def add_veth(name: str, peer: str, *extra: str) -> None:
    proc = ip("link", "add", name, "type", "veth", "peer", "name", peer, *extra, check=False)
    if proc.returncode != 0:
        pytest.skip(f"cannot create veth interfaces here: {proc.stderr.strip()}")


@pytest.fixture
def dummies(lib: Libbpf) -> Iterator[tuple[str, list[str]]]:
    """A front interface and four targets for BPF_PROG_TEST_RUN: veths in the root namespace (the
    ``dummy`` module is not always built, veth is)."""
    tag = uid()
    front, targets = f"gcpx{tag}in", [f"gcpx{tag}d{i}" for i in range(4)]
    try:
        for name in (front, *targets):
            add_veth(name, f"{name}p")
            ip("link", "set", name, "addrgenmode", "none", check=False)
            ip("link", "set", name, "up")
        yield front, targets
    finally:
        for name in (front, *targets):
            ip("link", "del", name, check=False)


@dataclass
class Topology:
    """src netns ──veth──► front (root ns, LB here) ──redirect──► t<i> ──veth──► dst<i> netns.

    Each dst namespace holds the same IP and MAC as the front veth, so redirected frames are accepted
    by its stack and a UDP socket there sees exactly which flows arrived.
    """

    tag: str
    front: str
    targets: list[str]
    src_ns: str
    dst_ns: list[str]
    peers: list[str]
    src_ip: str = "192.0.2.1"
    dst_ip: str = "192.0.2.2"
    namespaces: list[str] = field(default_factory=list)


@pytest.fixture
def netns_pair(lib: Libbpf) -> Iterator[Topology]:
    """Namespaces and veths for end-to-end traffic (three targets); all deleted after the test."""
    tag = uid()
    topo = Topology(
        tag=tag,
        front=f"gcpx{tag}in",
        targets=[f"gcpx{tag}t{i}" for i in range(3)],
        src_ns=f"gcpx{tag}src",
        dst_ns=[f"gcpx{tag}dst{i}" for i in range(3)],
        peers=[f"gcpx{tag}p{i}" for i in range(3)],
    )
    try:
        for ns in (topo.src_ns, *topo.dst_ns):
            ip("netns", "add", ns)
            topo.namespaces.append(ns)
            ip("-n", ns, "link", "set", "lo", "up")
        add_veth(topo.front, f"gcpx{tag}s", "netns", topo.src_ns)
        for t, p, ns in zip(topo.targets, topo.peers, topo.dst_ns, strict=True):
            add_veth(t, p, "netns", ns)
        front_mac = Path(f"/sys/class/net/{topo.front}/address").read_text().strip()
        for dev in (topo.front, *topo.targets):
            ip("link", "set", dev, "addrgenmode", "none")  # no IPv6 link-local chatter in the counters
            ip("link", "set", dev, "up")
        src_dev = f"gcpx{tag}s"
        ip("-n", topo.src_ns, "link", "set", src_dev, "addrgenmode", "none")
        ip("-n", topo.src_ns, "addr", "add", f"{topo.src_ip}/24", "dev", src_dev)
        ip("-n", topo.src_ns, "link", "set", src_dev, "up")
        # A static neighbour: nobody answers ARP on the front interface, and ARP would bypass the LB.
        ip("-n", topo.src_ns, "neigh", "add", topo.dst_ip, "lladdr", front_mac, "dev", src_dev)
        for p, ns in zip(topo.peers, topo.dst_ns, strict=True):
            ip("-n", ns, "link", "set", p, "address", front_mac, "addrgenmode", "none")
            ip("-n", ns, "addr", "add", f"{topo.dst_ip}/24", "dev", p)
            ip("-n", ns, "link", "set", p, "up")
        yield topo
    finally:
        for ns in topo.namespaces:
            ip("netns", "del", ns, check=False)  # deleting a namespace deletes its veths and their peers
        with contextlib.suppress(Exception):
            ip("link", "del", topo.front, check=False)


@contextlib.contextmanager
def _in_netns(ns: str) -> Iterator[None]:
    # setns moves only the calling thread; sockets and links created inside keep that namespace.
    orig = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        setns_net(target)
        try:
            yield
        finally:
            setns_net(orig)
    finally:
        os.close(orig)
        os.close(target)


@pytest.fixture
def in_netns() -> Callable[[str], contextlib.AbstractContextManager[None]]:
    """``with in_netns(name): …`` runs the block inside a namespace this test created."""
    return _in_netns


@pytest.fixture
def lb(bpffs: Path, dummies: tuple[str, list[str]], lib: Libbpf) -> Iterator[tuple[XdpActuator, int]]:
    """The LB loaded (generic XDP) on a dummy front with four dummy targets, and its program fd."""
    front, targets = dummies
    actuator = xdp.load(front, targets, bpffs / "lb", mode="skb", lib=lib)
    fd = lib.obj_get(bpffs / "lb" / "prog")
    try:
        yield actuator, fd
    finally:
        os.close(fd)
        with contextlib.suppress(PredictorError):
            actuator.unload()
