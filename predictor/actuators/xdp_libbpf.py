"""Thin ctypes bindings to ``libbpf.so.1``: the few calls the XDP actuator, its tests and the bench need.

Why ctypes and not ``bpftool -j``: a map update through libbpf costs ~2.4 µs against ~1 ms for a bpftool
process, and the profile switch latency is one of the numbers this project reports. No PyPI package
wraps libbpf well (the few that exist are small and stale, or need BCC), and Debian's ``libbpf1`` is
present wherever bpftool is.

Every failure becomes a :class:`BpfCallError` (an ``ActuatorError``) naming the call and the object, with
the kernel's errno kept so callers can tell a lost compare-and-swap (``EPERM``) from a real failure.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno as errno_mod
import os
from dataclasses import dataclass
from pathlib import Path

from predictor.errors import ActuatorError, EnvironmentUnsupportedError

__all__ = [
    "BPF_FS_MAGIC",
    "BpfCallError",
    "BpfObject",
    "Libbpf",
    "TestRunResult",
    "is_bpffs",
    "setns_net",
]

BPF_FS_MAGIC = 0xCAFE4A11
BPF_XDP = 37  # enum bpf_attach_type
BPF_F_REPLACE = 1 << 2
XDP_FLAGS_SKB_MODE = 1 << 1
XDP_FLAGS_DRV_MODE = 1 << 2
CLONE_NEWNET = 0x40000000


class BpfCallError(ActuatorError):
    """A libbpf call failed; ``errno`` is the kernel's error number."""

    def __init__(self, message: str, err: int) -> None:
        super().__init__(message)
        self.errno = err


class _TestRunOpts(ctypes.Structure):
    # struct bpf_test_run_opts, libbpf 1.1 (80 bytes on x86-64)
    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("data_in", ctypes.c_void_p),
        ("data_out", ctypes.c_void_p),
        ("data_size_in", ctypes.c_uint32),
        ("data_size_out", ctypes.c_uint32),
        ("ctx_in", ctypes.c_void_p),
        ("ctx_out", ctypes.c_void_p),
        ("ctx_size_in", ctypes.c_uint32),
        ("ctx_size_out", ctypes.c_uint32),
        ("retval", ctypes.c_uint32),
        ("repeat", ctypes.c_int),
        ("duration", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("cpu", ctypes.c_uint32),
        ("batch_size", ctypes.c_uint32),
    ]


class _LinkCreateOpts(ctypes.Structure):
    # struct bpf_link_create_opts up to the union (only ``flags`` is used for XDP links)
    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("flags", ctypes.c_uint32),
        ("iter_info", ctypes.c_void_p),
        ("iter_info_len", ctypes.c_uint32),
        ("target_btf_id", ctypes.c_uint32),
        ("cookie", ctypes.c_uint64),
    ]


class _LinkUpdateOpts(ctypes.Structure):
    _fields_ = [("sz", ctypes.c_size_t), ("flags", ctypes.c_uint32), ("old_prog_fd", ctypes.c_uint32)]


@dataclass(frozen=True)
class TestRunResult:
    """Outcome of one ``BPF_PROG_TEST_RUN``: the XDP action and the mean ns per repetition."""

    retval: int
    duration_ns: int
    data_out: bytes


def _load_lib(name: str) -> ctypes.CDLL:
    try:
        return ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise EnvironmentUnsupportedError(f"cannot load {name} (install libbpf1): {exc}") from exc


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def setns_net(fd: int) -> None:
    """Move the calling thread into the network namespace open at ``fd`` (Python 3.11 has no os.setns)."""
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise EnvironmentUnsupportedError(f"setns into a network namespace failed: {os.strerror(err)}")


def is_bpffs(path: Path) -> bool:
    """Whether ``path`` lies on a bpffs mount (checked with statfs's f_type, which os.statvfs lacks)."""
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on x86-64; f_type comes first
    if _libc.statfs(os.fsencode(path), buf) != 0:
        return False
    f_type = ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF
    return f_type == BPF_FS_MAGIC


class Libbpf:
    """The libbpf calls used here, with errors turned into ``BpfCallError``."""

    def __init__(self, soname: str = "libbpf.so.1", *, quiet: bool = True) -> None:
        self._lib = _load_lib(soname)
        lib = self._lib
        lib.bpf_object__open_file.restype = ctypes.c_void_p
        lib.bpf_object__open_file.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
        lib.bpf_object__load.argtypes = [ctypes.c_void_p]
        lib.bpf_object__close.argtypes = [ctypes.c_void_p]
        lib.bpf_object__close.restype = None
        lib.bpf_object__find_map_by_name.restype = ctypes.c_void_p
        lib.bpf_object__find_map_by_name.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.bpf_object__find_program_by_name.restype = ctypes.c_void_p
        lib.bpf_object__find_program_by_name.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.bpf_map__set_pin_path.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.bpf_map__fd.argtypes = [ctypes.c_void_p]
        lib.bpf_map__reuse_fd.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.bpf_program__fd.argtypes = [ctypes.c_void_p]
        lib.bpf_program__pin.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.bpf_obj_get.argtypes = [ctypes.c_char_p]
        lib.bpf_obj_pin.argtypes = [ctypes.c_int, ctypes.c_char_p]
        for fn in ("bpf_map_update_elem",):
            getattr(lib, fn).argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64]
        lib.bpf_map_lookup_elem.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        lib.bpf_map_delete_elem.argtypes = [ctypes.c_int, ctypes.c_void_p]
        lib.bpf_prog_test_run_opts.argtypes = [ctypes.c_int, ctypes.POINTER(_TestRunOpts)]
        lib.bpf_link_create.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
        lib.bpf_link_update.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_LinkUpdateOpts)]
        lib.bpf_link_detach.argtypes = [ctypes.c_int]
        lib.bpf_obj_get_info_by_fd.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32)]
        if quiet:
            # libbpf prints verifier logs to stderr; the CLI promises one-line errors, so mute it.
            lib.libbpf_set_print.restype = ctypes.c_void_p
            lib.libbpf_set_print.argtypes = [ctypes.c_void_p]
            lib.libbpf_set_print(None)
        self.num_cpus = int(lib.libbpf_num_possible_cpus())

    @staticmethod
    def _check(rc: int, what: str) -> int:
        if rc < 0:
            err = -rc if rc != -1 else (ctypes.get_errno() or errno_mod.EINVAL)
            raise BpfCallError(f"{what}: {os.strerror(err)}", err)
        return rc

    def open_object(self, path: Path) -> BpfObject:
        ptr = self._lib.bpf_object__open_file(os.fsencode(path), None)
        if not ptr:
            err = ctypes.get_errno() or errno_mod.EINVAL
            raise BpfCallError(f"cannot open BPF object {path}: {os.strerror(err)}", err)
        return BpfObject(self, int(ptr), path)

    def obj_get(self, path: Path) -> int:
        return self._check(self._lib.bpf_obj_get(os.fsencode(path)), f"cannot open pinned {path}")

    def obj_pin(self, fd: int, path: Path) -> None:
        self._check(self._lib.bpf_obj_pin(fd, os.fsencode(path)), f"cannot pin at {path}")

    def map_update(self, fd: int, key: bytes, value: bytes, what: str = "map") -> None:
        rc = self._lib.bpf_map_update_elem(fd, key, value, 0)
        self._check(rc, f"update of {what} failed")

    def map_lookup(self, fd: int, key: bytes, value_size: int, what: str = "map") -> bytes | None:
        buf = ctypes.create_string_buffer(value_size)
        rc = self._lib.bpf_map_lookup_elem(fd, key, buf)
        if rc < 0 and (-rc == errno_mod.ENOENT or ctypes.get_errno() == errno_mod.ENOENT):
            return None
        self._check(rc, f"lookup in {what} failed")
        return buf.raw

    def map_delete(self, fd: int, key: bytes) -> None:
        self._lib.bpf_map_delete_elem(fd, key)

    def test_run(self, prog_fd: int, data: bytes, *, repeat: int = 1, flags: int = 0) -> TestRunResult:
        out = ctypes.create_string_buffer(max(len(data) + 256, 4096))
        opts = _TestRunOpts(
            sz=ctypes.sizeof(_TestRunOpts),
            data_in=ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p),
            data_out=ctypes.cast(out, ctypes.c_void_p),
            data_size_in=len(data),
            data_size_out=len(out),
            repeat=repeat,
            flags=flags,
        )
        self._check(self._lib.bpf_prog_test_run_opts(prog_fd, ctypes.byref(opts)), "BPF_PROG_TEST_RUN")
        return TestRunResult(int(opts.retval), int(opts.duration), out.raw[: opts.data_size_out])

    def link_create_xdp(self, prog_fd: int, ifindex: int, *, skb_mode: bool) -> int:
        opts = _LinkCreateOpts(sz=ctypes.sizeof(_LinkCreateOpts))
        opts.flags = XDP_FLAGS_SKB_MODE if skb_mode else XDP_FLAGS_DRV_MODE
        rc = self._lib.bpf_link_create(prog_fd, ifindex, BPF_XDP, ctypes.byref(opts))
        return self._check(rc, f"cannot attach XDP to ifindex {ifindex}")

    def link_update(self, link_fd: int, new_prog_fd: int, old_prog_fd: int) -> None:
        """Compare-and-swap the link's program: fails with EPERM when ``old_prog_fd`` is no longer attached."""
        opts = _LinkUpdateOpts(sz=ctypes.sizeof(_LinkUpdateOpts), flags=BPF_F_REPLACE, old_prog_fd=old_prog_fd)
        self._check(self._lib.bpf_link_update(link_fd, new_prog_fd, ctypes.byref(opts)), "bpf_link_update")

    def link_detach(self, link_fd: int) -> None:
        self._check(self._lib.bpf_link_detach(link_fd), "bpf_link_detach")

    def obj_info(self, fd: int) -> bytes:
        """Raw ``bpf_*_info`` of a prog, map or link fd (callers unpack the few fields they need)."""
        buf = ctypes.create_string_buffer(256)
        size = ctypes.c_uint32(256)
        self._check(self._lib.bpf_obj_get_info_by_fd(fd, buf, ctypes.byref(size)), "bpf_obj_get_info_by_fd")
        return buf.raw[: size.value]


class BpfObject:
    """An opened (then loaded) BPF ELF object; close it to release fds not kept alive by pins or links."""

    def __init__(self, lib: Libbpf, ptr: int, path: Path) -> None:
        self._lib = lib
        self._ptr: int | None = ptr
        self.path = path

    def _handle(self) -> int:
        if self._ptr is None:
            raise ActuatorError(f"BPF object {self.path} is already closed")
        return self._ptr

    def _map(self, name: str) -> int:
        ptr = self._lib._lib.bpf_object__find_map_by_name(self._handle(), name.encode())
        if not ptr:
            raise ActuatorError(f"BPF object {self.path} has no map {name!r}")
        return int(ptr)

    def _prog(self, name: str) -> int:
        ptr = self._lib._lib.bpf_object__find_program_by_name(self._handle(), name.encode())
        if not ptr:
            raise ActuatorError(f"BPF object {self.path} has no program {name!r}")
        return int(ptr)

    def set_map_pin_path(self, name: str, path: Path) -> None:
        """Before load: reuse the map pinned at ``path`` if present, else create and pin it there."""
        rc = self._lib._lib.bpf_map__set_pin_path(self._map(name), os.fsencode(path))
        Libbpf._check(rc, f"cannot set pin path {path}")

    def reuse_map_fd(self, name: str, fd: int) -> None:
        """Before load: use an existing map (libbpf dups ``fd``) instead of creating one.

        Unlike a pin path this skips libbpf 1.1's compatibility check, which wrongly rejects a pinned
        devmap because the kernel adds ``BPF_F_RDONLY_PROG`` to its flags.
        """
        Libbpf._check(self._lib._lib.bpf_map__reuse_fd(self._map(name), fd), f"cannot reuse map {name}")

    def load(self) -> None:
        rc = self._lib._lib.bpf_object__load(self._handle())
        Libbpf._check(rc, f"kernel refused to load {self.path}")

    def map_fd(self, name: str) -> int:
        return Libbpf._check(self._lib._lib.bpf_map__fd(self._map(name)), f"map {name} has no fd")

    def prog_fd(self, name: str) -> int:
        return Libbpf._check(self._lib._lib.bpf_program__fd(self._prog(name)), f"program {name} has no fd")

    def pin_prog(self, name: str, path: Path) -> None:
        Libbpf._check(self._lib._lib.bpf_program__pin(self._prog(name), os.fsencode(path)), f"pin {path}")

    def close(self) -> None:
        if self._ptr is not None:
            self._lib._lib.bpf_object__close(self._ptr)
            self._ptr = None

    def __enter__(self) -> BpfObject:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
