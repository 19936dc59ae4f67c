"""The XDP actuator: load the load balancer, switch its profile atomically, read stats, unload cleanly.

Everything lives under one bpffs directory (``prog``, ``link`` and the ``lb_*`` maps), so the state
survives the agent and can be inspected with bpftool. A profile switch writes the *inactive* table of
``lb_luts`` and then flips ``lb_active`` (one aligned u32): packets see the old table or the new one,
never a mix. Tables are rebuilt with minimal movement (``xdp_slots.rebalance``). Program upgrades go
through ``bpf_link_update`` compare-and-swap, so the maps — and the live profile — are kept.

The flow-hash seed (``lb_seed``) is drawn from ``os.urandom`` at each load, before the program is
attached, and kept by upgrades: flows hash consistently for the life of one load, and differently on
another load or node, so the slot of a 5-tuple cannot be predicted from outside.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from predictor.actuators import Change
from predictor.actuators.xdp_libbpf import BpfCallError, BpfObject, Libbpf
from predictor.actuators.xdp_maps import (
    COUNTER,
    F_OBSERVE,
    F_STICKY,
    LEGACY_SEED,
    LUT,
    MAPS,
    MAX_TARGETS,
    PROG,
    SEED_MAP,
    STAT_OBSERVED,
    STAT_PASSED,
    STAT_UNPARSED,
    U32,
    Table,
)
from predictor.actuators.xdp_pins import default_object, ifindex, ifname, require_root_and_bpffs, teardown
from predictor.errors import ActuatorError, EnvironmentUnsupportedError, InputError, TemporaryActuatorError
from predictor.planner.xdp_slots import moved_fraction, rebalance, total_variation
from predictor.planner.xdp_types import Profile

__all__ = [
    "MAX_TARGETS",
    "STAT_OBSERVED",
    "STAT_PASSED",
    "STAT_UNPARSED",
    "Table",
    "XdpActuator",
    "XdpStatus",
    "default_object",
    "load",
]


@dataclass
class XdpStatus:
    """What ``predictor xdp status --json`` prints."""

    iface: str | None
    active_profile: str | None
    observe: bool
    sticky: bool
    targets: list[str]
    weights: dict[str, int]
    stats: dict[str, int]
    passed: int
    unparsed: int
    observed: int
    prog_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "active_profile": self.active_profile,
            "targets": self.targets,
            "weights": self.weights,
            "stats": self.stats,
            "passed": self.passed,
            "unparsed": self.unparsed,
            "observed": self.observed,
            "observe": self.observe,
            "sticky": self.sticky,
            "iface": self.iface,
            "prog_id": self.prog_id,
        }


class XdpActuator:
    """Control plane of one loaded load balancer, found through its pin directory."""

    def __init__(self, pin_dir: Path, lib: Libbpf | None = None) -> None:
        self.pin_dir = pin_dir
        self._lib = lib
        self.last_switch_ns: int | None = None

    @property
    def lib(self) -> Libbpf:
        if self._lib is None:
            self._lib = Libbpf()
        return self._lib

    def _require_loaded(self) -> None:
        require_root_and_bpffs(self.pin_dir)
        if not (self.pin_dir / "prog").exists():
            raise InputError(f"no XDP load balancer is pinned at {self.pin_dir} (run predictor xdp load)")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # Two writers could both pick the same "inactive" table, and the second would then rewrite the
        # live one in place; an flock on the pin dir serialises writers (libxdp locks bpffs the same way).
        fd = os.open(self.pin_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _fd(self, name: str) -> Iterator[int]:
        fd = self.lib.obj_get(self.pin_dir / name)
        try:
            yield fd
        finally:
            os.close(fd)

    # --- reads -------------------------------------------------------------------------------------

    def targets(self) -> list[str]:
        """Target interface names in devmap order (index = target id in the tables)."""
        names: list[str] = []
        with self._fd("lb_targets") as fd:
            for i in range(MAX_TARGETS):
                raw = self.lib.map_lookup(fd, U32.pack(i), 4, "lb_targets")
                if raw is None or U32.unpack(raw)[0] == 0:
                    break
                names.append(ifname(U32.unpack(raw)[0]))
        return names

    def active_index(self) -> int:
        with self._fd("lb_active") as fd:
            raw = self.lib.map_lookup(fd, U32.pack(0), 4, "lb_active")
        return U32.unpack(raw)[0] if raw else 0

    def table(self, index: int | None = None) -> Table:
        idx = self.active_index() if index is None else index
        with self._fd("lb_luts") as fd:
            raw = self.lib.map_lookup(fd, U32.pack(idx), LUT.size, "lb_luts")
        if raw is None:
            raise ActuatorError(f"lb_luts under {self.pin_dir} has no entry {idx}")
        return Table.unpack(raw)

    def hash_seed(self) -> int:
        """This load's flow-hash seed (``lb_seed``); not in ``status``: knowing it lets one aim flows."""
        with self._fd(SEED_MAP) as fd:
            raw = self.lib.map_lookup(fd, U32.pack(0), 4, SEED_MAP)
        return U32.unpack(raw)[0] if raw else LEGACY_SEED

    def counters(self) -> list[tuple[int, int]]:
        """(packets, bytes) per stats slot, summed over CPUs."""
        size = COUNTER.size * self.lib.num_cpus
        out: list[tuple[int, int]] = []
        with self._fd("lb_stats") as fd:
            for i in range(STAT_OBSERVED + 1):
                raw = self.lib.map_lookup(fd, U32.pack(i), size, "lb_stats") or bytes(size)
                per_cpu = [COUNTER.unpack_from(raw, c * COUNTER.size) for c in range(self.lib.num_cpus)]
                out.append((sum(p for p, _ in per_cpu), sum(b for _, b in per_cpu)))
        return out

    def status(self) -> XdpStatus:
        self._require_loaded()
        targets = self.targets()
        table = self.table()
        counters = self.counters()
        iface: str | None = None
        with contextlib.suppress(BpfCallError), self._fd("link") as link_fd:
            iface = ifname(U32.unpack_from(self.lib.obj_info(link_fd), 16)[0])  # bpf_link_info.xdp.ifindex
        with self._fd("prog") as prog_fd:
            prog_id = U32.unpack_from(self.lib.obj_info(prog_fd), 4)[0]
        return XdpStatus(
            iface=iface,
            active_profile=table.name if table.slots else None,
            observe=bool(table.flags & F_OBSERVE),
            sticky=bool(table.flags & F_STICKY),
            targets=targets,
            weights={t: table.weights[i] for i, t in enumerate(targets)} if table.slots else {},
            stats={t: counters[i][0] for i, t in enumerate(targets)},
            passed=counters[STAT_PASSED][0],
            unparsed=counters[STAT_UNPARSED][0],
            observed=counters[STAT_OBSERVED][0],
            prog_id=prog_id,
        )

    # --- plan / apply ------------------------------------------------------------------------------

    def _weights_for(self, profile: Profile, targets: Sequence[str]) -> list[int]:
        unknown = sorted(set(profile.weights) - set(targets))
        if unknown:
            raise InputError(
                f"profile {profile.name} names {', '.join(unknown)}, not a loaded target "
                f"(targets: {', '.join(targets)})"
            )
        weights = [profile.weights.get(t, 0) for t in targets]
        if sum(weights) <= 0:
            raise InputError(f"profile {profile.name} gives no loaded target a positive weight")
        return weights

    @staticmethod
    def _describe(name: str | None, weights: dict[str, int], flags: int) -> dict[str, Any]:
        return {
            "profile": name,
            "weights": weights,
            "observe": bool(flags & F_OBSERVE),
            "sticky": bool(flags & F_STICKY),
        }

    def _desired_table(self, desired: Profile, targets: Sequence[str], current: Table) -> Table | None:
        """The table to write for ``desired``, or None when ``current`` already is it."""
        weights = self._weights_for(desired, targets)
        flags = (F_OBSERVE if desired.observe else 0) | (F_STICKY if desired.sticky else 0)
        if (
            current.slots
            and (current.name, current.flags) == (desired.name, flags)
            and list(current.weights[: len(targets)]) == weights
        ):
            return None
        return Table(desired.name, flags, tuple(weights), tuple(rebalance(current.slots, weights)))

    def plan(self, desired: Profile) -> list[Change]:
        """One ``set-profile`` change, or ``[]`` when the active table already is ``desired``."""
        self._require_loaded()
        targets = self.targets()
        current = self.table()
        new = self._desired_table(desired, targets, current)
        if new is None:
            return []
        n = len(targets)
        before = self._describe(
            current.name if current.slots else None,
            dict(zip(targets, current.weights[:n], strict=True)) if current.slots else {},
            current.flags,
        )
        after = self._describe(new.name, dict(zip(targets, new.weights, strict=True)), new.flags)
        if current.slots and sum(current.weights[:n]) > 0:
            reason = (
                f"moves {moved_fraction(current.slots, new.slots):.1%} of flows "
                f"(ideal {total_variation(current.weights[:n], new.weights):.1%})"
            )
        else:
            reason = "first profile on this program"
        return [Change("xdp", str(self.pin_dir), "set-profile", before, after, reason)]

    def apply(self, changes: Sequence[Change], *, dry_run: bool = True) -> list[Change]:
        """Write each change's table into the inactive buffer, then flip ``lb_active``. Idempotent."""
        mine = [c for c in changes if c.actuator == "xdp" and c.action == "set-profile"]
        if dry_run or not mine:
            return list(mine)
        self._require_loaded()
        applied: list[Change] = []
        for change in mine:
            after = change.after
            desired = Profile(
                name=after["profile"], weights=dict(after["weights"]), observe=after["observe"], sticky=after["sticky"]
            )
            # Re-read under the lock: the table is rebuilt from what is live now, not from plan time.
            with self._locked():
                active = self.active_index()
                table = self._desired_table(desired, self.targets(), self.table(active))
                if table is None:
                    continue  # already converged: re-applying a plan is a no-op
                self._switch(table, active)
            applied.append(change)
        return applied

    def _switch(self, table: Table, active: int) -> None:
        inactive = 1 - active if active in (0, 1) else 0
        with self._fd("lb_luts") as luts, self._fd("lb_active") as act:
            self.lib.map_update(luts, U32.pack(inactive), table.pack(), "lb_luts")
            start = time.perf_counter_ns()
            self.lib.map_update(act, U32.pack(0), U32.pack(inactive), "lb_active")
            self.last_switch_ns = time.perf_counter_ns() - start

    def set_profile(self, profile: Profile, *, dry_run: bool = False) -> list[Change]:
        """Plan and apply in one call (what ``predictor xdp set-profile`` does)."""
        return self.apply(self.plan(profile), dry_run=dry_run)

    # --- upgrade / unload --------------------------------------------------------------------------

    def upgrade(self, obj_path: Path) -> int:
        """Swap in a new build of the program through the pinned link (CAS); returns the new prog id."""
        self._require_loaded()
        obj = self.lib.open_object(obj_path)
        try:
            return self._upgrade_locked(obj)
        finally:
            obj.close()

    def _upgrade_locked(self, obj: BpfObject) -> int:
        with self._locked():
            # Loaded by a build before per-load seeds: give the new program a seed map holding the old
            # fixed seed, so no flow moves across the upgrade.
            unseeded = not (self.pin_dir / SEED_MAP).exists()
            for name in MAPS:  # the new program uses the live maps: profiles, stats and seed survive
                if name == SEED_MAP and unseeded:
                    obj.set_map_pin_path(name, self.pin_dir / name)
                    continue
                with self._fd(name) as fd:
                    obj.reuse_map_fd(name, fd)
            obj.load()
            if unseeded:
                self.lib.map_update(obj.map_fd(SEED_MAP), U32.pack(0), U32.pack(LEGACY_SEED), SEED_MAP)
            new_fd = obj.prog_fd(PROG)
            with self._fd("prog") as old_fd, self._fd("link") as link_fd:
                try:
                    self.lib.link_update(link_fd, new_fd, old_fd)
                except BpfCallError as exc:
                    if exc.errno == 1:  # EPERM: someone else replaced the program first
                        raise TemporaryActuatorError(
                            f"program under {self.pin_dir} changed during the upgrade; re-read and retry"
                        ) from exc
                    raise
            (self.pin_dir / "prog").unlink()
            obj.pin_prog(PROG, self.pin_dir / "prog")
            return int(U32.unpack_from(self.lib.obj_info(new_fd), 4)[0])

    def unload(self) -> None:
        """Detach the link and remove every pin this actuator created, then the directory."""
        require_root_and_bpffs(self.pin_dir)
        if not self.pin_dir.is_dir():
            raise InputError(f"nothing is loaded at {self.pin_dir}")
        with self._locked():  # Linux lets a directory go while an fd holds it open
            # A pin directory that is a mount point (the node agent's hostPath in k8s/) stays: only pins go.
            teardown(self.lib, self.pin_dir, remove_dir=not os.path.ismount(self.pin_dir))


def load(
    iface: str,
    targets: Sequence[str],
    pin_dir: Path,
    *,
    mode: Literal["skb", "native"] = "native",
    profile: Profile | None = None,
    obj_path: Path | None = None,
    lib: Libbpf | None = None,
) -> XdpActuator:
    """Load, pin and attach the program; on any failure nothing stays attached or pinned."""
    require_root_and_bpffs(pin_dir)
    obj_path = obj_path or default_object()
    if not obj_path.is_file():
        raise EnvironmentUnsupportedError(f"XDP object {obj_path} not found; build it with make -C bpf")
    if any((pin_dir / name).exists() for name in ("prog", "link", *MAPS)):
        raise ActuatorError(f"an XDP load balancer is already pinned at {pin_dir}; unload it first")
    front_idx = ifindex(iface, "--iface")
    if not targets or len(targets) > MAX_TARGETS or len(set(targets)) != len(targets):
        raise InputError(f"--targets needs 1 to {MAX_TARGETS} distinct interfaces, got {','.join(targets)!r}")
    target_idx = [ifindex(t, "--targets") for t in targets]
    lib = lib or Libbpf()
    actuator = XdpActuator(pin_dir, lib)
    weights = actuator._weights_for(profile, targets) if profile else None

    created_dir = not pin_dir.exists()
    obj = None
    try:
        pin_dir.mkdir(exist_ok=True)
        obj = lib.open_object(obj_path)
        for name in MAPS:
            obj.set_map_pin_path(name, pin_dir / name)
        obj.load()
        seed = int.from_bytes(os.urandom(4), "little")  # before attach: no packet sees another seed
        lib.map_update(obj.map_fd(SEED_MAP), U32.pack(0), U32.pack(seed), SEED_MAP)
        obj.pin_prog(PROG, pin_dir / "prog")
        for i, idx in enumerate(target_idx):
            lib.map_update(obj.map_fd("lb_targets"), U32.pack(i), U32.pack(idx), f"lb_targets ({targets[i]})")
        if profile is not None and weights is not None:
            flags = (F_OBSERVE if profile.observe else 0) | (F_STICKY if profile.sticky else 0)
            table = Table(profile.name, flags, tuple(weights), tuple(rebalance((), weights)))
            lib.map_update(obj.map_fd("lb_luts"), U32.pack(0), table.pack(), "lb_luts")
        try:
            link_fd = lib.link_create_xdp(obj.prog_fd(PROG), front_idx, skb_mode=mode == "skb")
        except BpfCallError as exc:
            raise ActuatorError(f"cannot attach XDP to {iface} in {mode} mode: {os.strerror(exc.errno)}") from exc
        try:
            lib.obj_pin(link_fd, pin_dir / "link")
        finally:
            os.close(link_fd)  # the pin keeps the program attached
    except BaseException as exc:
        with contextlib.suppress(Exception):
            teardown(lib, pin_dir, remove_dir=created_dir)
        if isinstance(exc, OSError):
            raise ActuatorError(f"cannot load into {pin_dir}: {exc.strerror or exc}") from exc
        raise
    finally:
        if obj is not None:
            obj.close()
    return actuator
