"""Kubernetes quantities for GPU counts: parse what the API server returns, write what it expects.

Queue specs hold ``ResourceList`` values (``"8"``, ``"8000m"``, ``8``); writing a float such as ``8.0``
would be rejected by the CRD pattern, and Volcano's own metrics report scalar resources in milli-units
(1 GPU = 1000). One place converts, so no caller ever mixes the three.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from predictor.bounds import MAX_GPUS  # the largest GPU count any planner input may hold
from predictor.errors import InputError

__all__ = ["MAX_GPUS", "MILLI", "bounded", "format_quantity", "from_milli", "parse_quantity"]

MILLI = 1000.0

_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))((?:[KMGTPE]i)|[numkMGTPE]|(?:[eE][+-]?[0-9]+))?$")
_SUFFIX: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


def parse_quantity(value: object, *, what: str) -> float:
    """A quantity (``"8"``, ``"500m"``, ``"1k"``, ``8``) as a float; ``what`` names it in errors.

    Resource amounts are never negative and must fit a float: ``-4`` and ``1e400`` are errors.
    """
    number = _parse(value, what=what)
    if not math.isfinite(number):
        raise InputError(f"{what}: {value!r} is too large to be a quantity")
    if number < 0:
        raise InputError(f"{what}: {value!r} is negative; resource quantities are >= 0")
    return number


def bounded(resource: str, amount: float, *, what: str, value: object) -> float:
    """``amount`` of ``resource``, refused above ``MAX_GPUS`` when the resource counts GPUs (its name says
    "gpu": nvidia.com/gpu, amd.com/gpu); memory and CPU quantities are legitimately far larger."""
    if "gpu" in resource.lower() and amount > MAX_GPUS:
        raise InputError(f"{what}: {value!r} is above {MAX_GPUS:g} GPUs")
    return amount


def _parse(value: object, *, what: str) -> float:
    if isinstance(value, bool):
        raise InputError(f"{what}: {value!r} is not a Kubernetes quantity")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise InputError(f"{what}: {value!r} is not a finite quantity")
        return float(value)
    if not isinstance(value, str):
        raise InputError(f"{what}: {value!r} is not a Kubernetes quantity")
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise InputError(f"{what}: {value!r} is not a Kubernetes quantity")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        if suffix[:1] in ("e", "E"):
            return float(Decimal(number + suffix))
        return float(Decimal(number) * _SUFFIX[suffix])
    except (InvalidOperation, KeyError) as exc:
        raise InputError(f"{what}: {value!r} is not a Kubernetes quantity") from exc


def format_quantity(gpus: float) -> str:
    """GPUs as the canonical quantity string: ``"8"`` for whole numbers, ``"1500m"`` otherwise."""
    if not math.isfinite(gpus) or gpus < 0:
        raise ValueError(f"cannot write {gpus!r} as a quantity")
    milli = round(gpus * 1000)
    if milli % 1000 == 0:
        return str(milli // 1000)
    return f"{milli}m"


def from_milli(milli: float) -> float:
    """Volcano metric value (milli-units, 1 GPU = 1000) to GPUs."""
    return float(milli) / MILLI
