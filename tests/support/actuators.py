"""Actuator settings for tests that predate per-queue modes: every queue managed, changes resize it.

The loop manages only queues that opt in and recommends by default; these tests assert what resizing does to
queues that carry no opt-in annotation, so they say so explicitly instead of relying on a default.
"""

from __future__ import annotations

from typing import Any

__all__ = ["resizing"]


def resizing(writes: str) -> dict[str, Any]:
    """``actuators`` keys: queue patches sent as ``writes`` (plan | server-dry-run | apply) to every queue, the
    XDP inputs likewise."""
    return {"queues": {"writes": writes, "mode": "apply", "manage": {"all": True}}, "xdp": {"mode": writes}}
