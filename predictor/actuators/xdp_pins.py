"""The pin directory: where the built program is, whether this machine can host it, and how it goes.

Everything the load balancer owns lives in one bpffs directory (``prog``, ``link``, ``lb_*`` maps), so
checking it (root, a bpffs mount, a name bpffs accepts) and removing it are one small idea, kept apart
from the actuator's plan/apply logic.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

from predictor.actuators.xdp_libbpf import BpfCallError, Libbpf, is_bpffs
from predictor.actuators.xdp_maps import MAPS
from predictor.errors import ActuatorError, EnvironmentUnsupportedError, InputError

__all__ = ["default_object", "ifindex", "ifname", "require_root_and_bpffs", "teardown"]


def default_object() -> Path:
    """Where the built program is: ``$PREDICTOR_XDP_OBJECT`` or ``bpf/build/xdp_lb.o`` in the checkout."""
    env = os.environ.get("PREDICTOR_XDP_OBJECT")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "bpf" / "build" / "xdp_lb.o"


def ifname(ifindex: int) -> str:
    """Interface name for status output; a vanished interface still prints something useful."""
    try:
        return socket.if_indextoname(ifindex)
    except OSError:
        return f"ifindex:{ifindex}"


def ifindex(name: str, what: str) -> int:
    """Interface index, or an InputError naming the flag (``what``) that named a missing interface."""
    try:
        return socket.if_nametoindex(name)
    except OSError:
        raise InputError(f"no such {what} interface: {name}") from None


def require_root_and_bpffs(pin_dir: Path) -> None:
    """Fail early, before anything is created, when this machine cannot host the program."""
    if os.geteuid() != 0:
        raise EnvironmentUnsupportedError("XDP needs root (CAP_BPF and CAP_NET_ADMIN); run as root")
    if "." in pin_dir.name:
        raise InputError(f"--pin-dir {pin_dir}: bpffs refuses names containing '.'")
    try:
        parent = pin_dir if pin_dir.is_dir() else pin_dir.parent
        if not parent.is_dir():
            raise InputError(f"--pin-dir {pin_dir}: {parent} does not exist")
    except OSError as exc:
        raise InputError(f"--pin-dir {pin_dir}: {exc.strerror}") from exc
    if not is_bpffs(parent):
        raise EnvironmentUnsupportedError(
            f"{parent} is not on a bpffs mount (mount -t bpf bpf /sys/fs/bpf) for --pin-dir {pin_dir}"
        )


def teardown(lib: Libbpf, pin_dir: Path, *, remove_dir: bool = True) -> None:
    """Detach the pinned link explicitly (another process may hold a link fd), then drop every pin."""
    link = pin_dir / "link"
    if link.exists():
        fd = lib.obj_get(link)
        try:
            with contextlib.suppress(BpfCallError):  # already defunct (interface gone)
                lib.link_detach(fd)
        finally:
            os.close(fd)
    for name in ("link", "prog", *MAPS):
        with contextlib.suppress(FileNotFoundError):
            (pin_dir / name).unlink()
    if not remove_dir:
        return
    try:
        pin_dir.rmdir()
    except OSError as exc:
        raise ActuatorError(f"cannot remove {pin_dir}: {exc.strerror} (foreign files left there?)") from exc
