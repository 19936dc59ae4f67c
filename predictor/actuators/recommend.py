"""Recommend mode: a queue's recommendation written onto it as annotations, its spec never touched.

Why annotations: a recommendation nobody can see is not adopted. ``kubectl get queue team-a -o yaml`` shows
``gpu-capacity-predictor/recommended-deserved`` and friends next to the live spec, as the Vertical Pod
Autoscaler shows its recommendation in status (a Queue's status belongs to Volcano's controller). The
patch goes through the same safe path as a quota patch — read, compare, merge patch carrying the
resourceVersion read, CRD schema check, ``dryRun=All`` outside apply — and is idempotent: when the
annotations already say the same (the timestamp aside) nothing is sent, so a quiet cluster sees no churn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from predictor.actuators import Change
from predictor.actuators.schemas import validate_object
from predictor.actuators.volcano import Outcome
from predictor.errors import ActuatorError, TemporaryActuatorError
from predictor.planner import FieldChange, Hold, QueueState, apply_merge_patch, format_quantity
from predictor.planner.state import FIELDS

__all__ = [
    "AT",
    "KEYS",
    "MODE_ANNOTATION",
    "RECOMMENDATION_KEYS",
    "QueueWriter",
    "annotate_change",
    "apply_annotations",
    "queue_mode",
    "recommendation",
    "resources_of",
]

PREFIX = "gpu-capacity-predictor/"
MODE_ANNOTATION = PREFIX + "mode"
AT = PREFIX + "recommended-at"
KEYS = tuple(PREFIX + k for k in ("recommended-deserved", "recommended-guarantee", "recommended-capability"))
REASON, MODEL = PREFIX + "reason", PREFIX + "model"
RECOMMENDATION_KEYS = (*KEYS, REASON, MODEL)  # what a queue switched to apply mode no longer carries
MODES = ("recommend", "apply")


class QueueWriter(Protocol):
    """What an annotation patch needs of the actuator (``VolcanoActuator`` has it)."""

    retries: int

    def get_queue(self, name: str) -> dict[str, Any]: ...

    def send_patch(self, name: str, body: Mapping[str, Any], *, dry_run: bool, what: str = "patch queue") -> None: ...


def queue_mode(obj: Mapping[str, Any], default: str) -> str:
    """The queue's own mode (its ``gpu-capacity-predictor/mode`` annotation), else ``default``.

    An annotation that is neither ``recommend`` nor ``apply`` means ``recommend``: a typo never turns
    resizing on."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    said = str(annotations.get(MODE_ANNOTATION, "")).strip().lower()
    if not said:
        return default
    return said if said in MODES else "recommend"


def _values(values: Mapping[str, float], resources: Sequence[str]) -> str | None:
    shown = [f"{r}={format_quantity(values[r])}" for r in resources if r in values]
    return ",".join(shown) or None


def recommendation(
    desired: QueueState,
    changes: Sequence[FieldChange],
    held: Sequence[Hold],
    resources: Sequence[str],
    models: Mapping[str, str],
) -> dict[str, str | None]:
    """The annotations of one queue's recommendation (``None``: the key is removed).

    Values are ``<resource>=<quantity>`` (``nvidia.com/gpu=24``), comma-separated when several resources are
    planned. The reason names each moved field and the rule that set it, without the forecast's numbers,
    so an unchanged recommendation reads the same every cycle (the audit log keeps the full text).
    """
    wanted: dict[str, str | None] = {
        key: _values(desired.get(name), resources)
        for key, name in zip(KEYS, ("deserved", "guarantee", "capability"), strict=True)
    }
    moved = []
    for c in changes:
        what = "weight" if c.field == "weight" else f"{c.field}[{c.resource}]"
        before = "unset" if c.before is None else f"{c.before:g}"
        moved.append(f"{what} {before}->{c.after:g} ({c.code})")
    if moved:
        reason = "; ".join(moved)
    else:
        codes = sorted({h.code for h in held})
        reason = "no change" + (f": held ({', '.join(codes)})" if codes else ": at its target")
    wanted[REASON] = reason
    wanted[MODEL] = ",".join(sorted(models.values())) or None
    return wanted


def _differs(live: Mapping[str, Any], wanted: Mapping[str, str | None]) -> bool:
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    return any(annotations.get(k) != v for k, v in wanted.items() if k != AT)


def annotate_change(
    name: str, live: Mapping[str, Any], wanted: Mapping[str, str | None], at: str | None
) -> Change | None:
    """An ``annotate-queue`` change to ``wanted`` (stamped ``at``; ``None`` removes the stamp), or ``None``
    when the queue already says so."""
    if not _differs(live, wanted):
        return None
    meta = live.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    return Change(
        actuator="volcano",
        target=name,
        action="annotate-queue",
        before={
            "resourceVersion": meta.get("resourceVersion"),
            "annotations": {k: annotations.get(k) for k in wanted},
        },
        after={"metadata": {"annotations": {**wanted, AT: at}}},
        reason=str(wanted.get(REASON) or ""),
    )


def apply_annotations(actuator: QueueWriter, changes: Sequence[Change], *, dry_run: bool) -> list[Outcome]:
    """Send each ``annotate-queue`` change (``dryRun=All`` when ``dry_run``); one outcome per queue."""
    return [_annotate_one(actuator, change, dry_run) for change in changes]


def _annotate_one(actuator: QueueWriter, change: Change, dry_run: bool) -> Outcome:
    name, wanted = change.target, change.after["metadata"]["annotations"]
    ok = "dry-run-ok" if dry_run else "applied"
    last = ""
    for _ in range(actuator.retries + 1):
        try:
            live = actuator.get_queue(name)
        except ActuatorError as exc:
            last = str(exc)
            if isinstance(exc, TemporaryActuatorError):
                continue
            return Outcome(change, "failed", last)
        if not _differs(live, wanted):
            return Outcome(change, ok, "annotations already say so")
        # Only metadata.annotations: a spec edited since the plan is the user's, and stays theirs.
        version = (live.get("metadata") or {}).get("resourceVersion")
        body = {"metadata": {"resourceVersion": version, **change.after["metadata"]}}
        try:
            validate_object(apply_merge_patch(live, body))
        except ActuatorError as exc:
            return Outcome(change, "rejected", f"not sent: {exc}")
        try:
            actuator.send_patch(name, body, dry_run=dry_run, what="annotate queue")
        except TemporaryActuatorError as exc:
            last = str(exc)  # 409 (edited meanwhile), timeout, 5xx: re-read and decide again
            continue
        except ActuatorError as exc:
            return Outcome(change, "rejected", str(exc))
        return Outcome(change, ok)
    return Outcome(change, "failed", f"gave up after {actuator.retries + 1} tries: {last}")


def resources_of(desired: QueueState, changes: Sequence[FieldChange], default: str) -> list[str]:
    """The resources a queue's recommendation shows: those its changes touch, and the planner's resource."""
    touched = {c.resource for c in changes if c.resource is not None} | {default}
    present = {r for name in FIELDS for r in desired.get(name)}
    return sorted(touched & present) or sorted(touched)
