"""After a crash: the patches whose ``intent`` was audited but whose outcome was not, settled against the cluster.

Each queue is one merge patch, so a patch either landed or did not: the live queue says which, and the audit
log gets the outcome the crashed loop could not write (``applied`` or ``abandoned``), never a guess.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from predictor.actuators.audit import AuditRecord
from predictor.planner import parse_quantity

__all__ = ["settle_intents"]


def settle_intents(
    pending: Sequence[dict[str, Any]],
    queue_objects: Sequence[dict[str, Any]],
    now: pd.Timestamp,
    *,
    cluster: str | None,
) -> list[AuditRecord]:
    """One outcome record per pending intent: ``applied`` if the live queue shows its value, else ``abandoned``."""
    live = {str(o["metadata"]["name"]): o for o in queue_objects}
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
