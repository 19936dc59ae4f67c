"""The audit log: every decision of the loop as append-only JSON lines, and the loop's small state file.

Why a log and not a database: it is greppable, shippable by any log agent, and enough to rebuild what a
restarted loop needs — when each queue last changed (cooldowns), which patches were in flight when it
died (``intent`` without an outcome), and which cycle slots are already done (so none is repeated).
Each batch is one ``write`` on an ``O_APPEND`` descriptor followed by ``fsync``: concurrent writers
cannot interleave inside a line, and a crash can tear at most the last line, which readers skip.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from predictor.atomicio import fsync_directory, write_text
from predictor.errors import ActuatorError, redact_url
from predictor.userfiles import parse_structured, read_text

__all__ = ["AuditLog", "AuditRecord", "read_state", "write_state"]

# One encoder for every record: ``json.dumps`` with options builds a new one per call (4,000 per fleet cycle).
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
# Outcomes that mean "this queue changed" for the cooldown, per actuator mode.
CHANGED = {"apply": ("applied",), "server-dry-run": ("dry-run-ok",), "plan": ("planned",)}


@dataclass(frozen=True)
class AuditRecord:
    """One line of the audit log."""

    timestamp: str  # ISO 8601 UTC, the cycle's "now"
    cycle: str  # the cycle slot id, e.g. "2026-11-29T18:00:00Z"
    queue: str
    field: str | None
    before: Any
    after: Any
    reason: str
    mode: str
    # intent | applied | dry-run-ok | planned | held | rejected | conflict | failed | cycle-done | xdp | react | finding
    outcome: str
    code: str = ""
    resource: str | None = None
    unix: float = 0.0
    # Family → model URI served for this decision ({"gpu-forecast": "models:/gpu-forecast/7", ...}); on
    # records of changes (planned, intent and their outcomes). Absent from the line when None.
    models: dict[str, str] | None = None
    # The cluster of a fleet (``Settings.clusters``) the decision is about. Absent from the line for the
    # single unnamed cluster, so the records of a loop without clusters are what they always were.
    cluster: str | None = None
    # A root-cause finding (outcome ``finding``, ``predictor.loop.rca``): cause, node, gpu, job, queue and
    # probability. Absent from the line when None.
    finding: dict[str, Any] | None = None

    def to_json(self) -> str:
        # Reasons quote errors, which may quote a URL: no password reaches the log (errors.redact_url).
        # A shallow dict (``asdict`` deep-copies every value: a third of a 2,000-queue cycle's audit time).
        doc = {f.name: getattr(self, f.name) for f in fields(self)}
        doc["reason"] = redact_url(self.reason)
        for optional in ("models", "cluster", "finding"):
            if doc[optional] is None:
                del doc[optional]
        return _ENCODER.encode(doc)


class AuditLog:
    """Append-only JSON-lines file of ``AuditRecord``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # Append-only, so records already parsed stay valid: each read parses only the new tail.
        self._records: list[dict[str, Any]] = []
        self._by_cluster: dict[str | None, list[dict[str, Any]]] = {}  # the same records by ``cluster``
        self._index = _Index()
        self._offset = 0
        self._identity: tuple[int, int] | None = None

    def append(self, records: Iterable[AuditRecord]) -> int:
        lines = "".join(r.to_json() + "\n" for r in records)
        if not lines:
            return 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    lines = "\n" + lines  # end a line torn by a crash, so it cannot swallow this record
                data = lines.encode("utf-8")
                written = os.write(fd, data)
                if written != len(data):
                    raise OSError(f"short write ({written} of {len(data)} bytes)")
                os.fsync(fd)
            finally:
                os.close(fd)
            if not size:  # the file may be new: make its directory entry durable too
                fsync_directory(self.path.parent)
        except OSError as exc:
            raise ActuatorError(f"cannot append to audit log {self.path}: {exc}") from exc
        return lines.count("\n")

    def read(self) -> list[dict[str, Any]]:
        """Every complete record; a torn last line (crash mid-write) is skipped."""
        self._refresh()
        return list(self._records)

    def _refresh(self) -> None:
        """Parse what was appended since the last read (everything again after a rotation)."""
        try:
            with self.path.open("rb") as handle:
                stat = os.fstat(handle.fileno())
                identity = (stat.st_dev, stat.st_ino)
                if identity != self._identity or stat.st_size < self._offset:  # replaced or truncated (rotation)
                    self._records, self._by_cluster, self._offset, self._identity = [], {}, 0, identity
                    self._index = _Index()
                handle.seek(self._offset)
                tail = handle.read()
        except FileNotFoundError:
            self._records, self._by_cluster, self._offset, self._identity = [], {}, 0, None
            self._index = _Index()
            return
        except OSError as exc:
            raise ActuatorError(f"cannot read audit log {self.path}: {exc}") from exc
        end = tail.rfind(b"\n") + 1  # a line without its newline is still being written, or torn
        for line in tail[:end].splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                self._records.append(record)
                cluster = record.get("cluster")  # a hand-edited line may hold anything: never a key error
                key = cluster if cluster is None or isinstance(cluster, str) else repr(cluster)
                self._by_cluster.setdefault(key, []).append(record)
                self._index.add(key, record)
        self._offset += end

    def of(self, cluster: str | None) -> list[dict[str, Any]]:
        """The records of one cluster (``None``: the unnamed one, whose records carry no ``cluster``).

        A fleet's loops share one log; equal queue names of two clusters never share a cooldown, a done
        cycle slot or an open intent.
        """
        self._refresh()
        return list(self._by_cluster.get(cluster, []))

    def last_changed(self, mode: str, cluster: str | None = None) -> dict[str, float]:
        """Queue → unix time of its last change in ``mode`` (what cooldowns are measured from)."""
        self._refresh()
        return dict(self._index.changed.get((cluster, mode), {}))

    def done_cycles(self, cluster: str | None = None) -> set[str]:
        self._refresh()
        return set(self._index.done.get(cluster, ()))

    def pending_intents(self, cluster: str | None = None) -> list[dict[str, Any]]:
        """``intent`` records with no later outcome for the same cycle and queue: patches cut off by a crash."""
        self._refresh()
        return [r for records in self._index.open.get(cluster, {}).values() for r in records]


class _Index:
    """What the loop asks of the log every cycle, kept up to date as records are parsed.

    Why: the log only grows (a fleet cycle appends about 4,000 records), and scanning every record for
    cooldowns, done cycles and open intents each cycle would cost more every hour the loop runs. Each
    record updates these once, in log order, exactly as the scans did.
    """

    def __init__(self) -> None:
        self.changed: dict[tuple[str | None, str], dict[str, float]] = {}  # (cluster, mode) → queue → unix
        self.done: dict[str | None, set[str]] = {}  # cluster → cycle slots with a cycle-done record
        self.open: dict[str | None, dict[tuple[str, str], list[dict[str, Any]]]] = {}  # intents, no outcome yet

    def add(self, cluster: str | None, record: dict[str, Any]) -> None:
        outcome, mode = record.get("outcome"), record.get("mode")
        if isinstance(mode, str) and outcome in CHANGED.get(mode, ()) and "queue" in record:
            try:
                unix = float(record.get("unix", 0.0))
            except (TypeError, ValueError):  # a hand-edited line: counted from the epoch, never an error here
                unix = 0.0
            queue, changed = str(record["queue"]), self.changed.setdefault((cluster, mode), {})
            changed[queue] = max(changed.get(queue, 0.0), unix)
        if outcome == "cycle-done":
            self.done.setdefault(cluster, set()).add(str(record.get("cycle")))
        key = (str(record.get("cycle")), str(record.get("queue")))
        if outcome == "intent":
            self.open.setdefault(cluster, {}).setdefault(key, []).append(record)
        elif outcome not in ("held", "cycle-done"):
            self.open.get(cluster, {}).pop(key, None)


def read_state(path: Path) -> dict[str, Any]:
    """The loop's state file (stabilisation memory); empty when absent."""
    if not path.exists():
        return {}
    data = parse_structured(
        read_text(path, "loop state", ActuatorError), "loop state", path, ActuatorError, is_json=True
    )
    return data if isinstance(data, dict) else {}


def write_state(path: Path, state: Mapping[str, Any]) -> None:
    write_text(path, json.dumps(state, sort_keys=True))
