"""Settling a crashed loop's open intents: applied if the live queue shows the value, else abandoned.

Each queue is one merge patch, so a patch either landed whole or not at all; the live object says which.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from predictor.actuators.audit import AuditRecord
from predictor.planner import parse_quantity

__all__ = ["settle_intents"]


def settle_intents(
    pending: Sequence[Mapping[str, Any]], live: Mapping[str, Mapping[str, Any]], now: pd.Timestamp, cluster: str | None
) -> list[AuditRecord]:
    """One outcome record per open ``intent`` record, judged against the live queues."""
    records = []
    for intent in pending:
        obj = live.get(str(intent["queue"]), {})
        spec = obj.get("spec") or {}
        source = (
            (spec.get("guarantee") or {}).get("resource")
            if intent["field"] == "guarantee"
            else spec.get(intent["field"])
        )
        value = (source or {}).get(intent["resource"]) if intent["field"] != "weight" else spec.get("weight")
        landed = value is not None and math.isclose(parse_quantity(value, what="live"), float(intent["after"]))
        records.append(
            AuditRecord(
                timestamp=now.isoformat(),
                cycle=intent["cycle"],
                queue=intent["queue"],
                field=intent["field"],
                resource=intent.get("resource"),
                before=intent["before"],
                after=intent["after"],
                reason="found on the live queue after a restart" if landed else "not applied before a restart",
                mode=intent["mode"],
                outcome="applied" if landed else "abandoned",
                code=intent.get("code", ""),
                unix=float(intent.get("unix", now.timestamp())),
                cluster=cluster,
            )
        )
    return records
