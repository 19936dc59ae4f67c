"""Actuators: the only code that changes a cluster or a kernel, always as plan → apply.

Every actuator (Volcano queues, XDP profiles, ...) turns a desired state into a list of ``Change`` with
``plan(desired)`` — empty once converged — and carries them out with ``apply(changes, dry_run=True)``.
Planning is a read; applying is idempotent, so a loop can re-run a cycle after a crash and a second
apply of the same plan changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Change"]


@dataclass(frozen=True)
class Change:
    """One reviewable change: what is changed, from what, to what, and why."""

    actuator: str  # "xdp", "volcano", ...
    target: str  # the thing changed: a bpffs pin dir, a queue name
    action: str  # verb, e.g. "set-profile", "patch-queue"
    before: Mapping[str, Any] = field(default_factory=dict)
    after: Mapping[str, Any] = field(default_factory=dict)
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain data for plan files, audit logs and ``--json`` output."""
        data = asdict(self)
        data["before"] = dict(self.before)
        data["after"] = dict(self.after)
        return data
