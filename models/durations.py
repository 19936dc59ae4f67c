"""One grammar for durations, because the same string reaches flags, settings and model parameters.

A bare number is seconds, as in Prometheus' ``step`` parameter and Kubernetes' ``*Seconds`` fields
(pandas alone would read ``"60"`` as 60 nanoseconds). Anything else is one or more ``<number><unit>``
parts, largest unit first (``1h30m``; a number may have decimals, ``1.5h``): Prometheus' units
``ms s m h d w y`` plus the pandas spellings forecaster ``freq`` parameters have always used (``min``,
``D``, ``W``). ``y`` is 365 days, as in Prometheus; a month has no fixed length and is refused. This
module is pure (no project imports) so that ``models/`` and ``predictor/`` both read a duration through
it and cannot disagree.
"""

from __future__ import annotations

import itertools
import re
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas only where a Timedelta is returned: the node agents parse durations without it
    import pandas as pd

__all__ = ["DURATION_EXAMPLES", "UNIT_SECONDS", "DurationError", "duration_ns", "parse_duration"]

_SECOND_NS = 1_000_000_000
UNIT_SECONDS: dict[str, Decimal] = {
    "y": Decimal(365 * 86400),
    "w": Decimal(7 * 86400),
    "W": Decimal(7 * 86400),
    "d": Decimal(86400),
    "D": Decimal(86400),
    "h": Decimal(3600),
    "m": Decimal(60),
    "min": Decimal(60),
    "s": Decimal(1),
    "ms": Decimal("0.001"),
}
DURATION_EXAMPLES = "60 (seconds), 30s, 5m, 5min, 1h30m, 1D"
_NUMBER = r"\d+(?:\.\d+)?"
# Longer spellings first, so "5min" and "5ms" are not read as "5m" followed by junk.
_PART = re.compile(rf"({_NUMBER})(min|ms|[ywWdDhms])")


class DurationError(ValueError):
    """A string (or number) that is not a positive duration; the message names the input."""


def _nanoseconds(raw: str) -> int | None:
    """Whole nanoseconds of ``raw``, or None when it does not follow the grammar."""
    if re.fullmatch(_NUMBER, raw):
        return int(Decimal(raw) * _SECOND_NS)
    parts = _PART.findall(raw)
    if not parts or "".join(n + u for n, u in parts) != raw:
        return None
    sizes = [UNIT_SECONDS[u] for _, u in parts]
    if any(later >= earlier for earlier, later in itertools.pairwise(sizes)):
        return None  # "30m1h" or "1d1D": each unit once, largest first, as Prometheus requires
    return int(sum(Decimal(n) * size for n, size in zip((n for n, _ in parts), sizes, strict=True)) * _SECOND_NS)


def duration_ns(value: str | float | timedelta, *, name: str = "duration") -> int:
    """``"60"`` (seconds), ``"30s"``, ``"5min"``, ``"1h30m"``, ``"1D"``, a number of seconds or a timedelta
    → positive whole nanoseconds; anything else raises ``DurationError`` naming ``name`` and the input."""
    bad = DurationError(f"{name} {value!r} is not a duration (examples: {DURATION_EXAMPLES})")
    ns: int | None
    if isinstance(value, timedelta):  # pd.Timedelta is one too, with nanoseconds beyond the microsecond
        ns = value // timedelta(microseconds=1) * 1000 + int(getattr(value, "nanoseconds", 0))
    elif isinstance(value, int | float) and not isinstance(value, bool):
        ns = int(Decimal(str(value)) * _SECOND_NS) if Decimal(str(value)).is_finite() else None
    elif isinstance(value, str):
        ns = _nanoseconds(value.strip())
    else:
        ns = None
    if ns is None:
        raise bad
    if ns <= 0:
        raise DurationError(f"{name} {value!r} must be longer than zero")
    return ns


def parse_duration(value: str | float | timedelta, *, name: str = "duration") -> pd.Timedelta:
    """``duration_ns`` as a positive ``pd.Timedelta``."""
    import pandas as pd

    ns = duration_ns(value, name=name)
    try:
        return pd.Timedelta(ns, unit="ns")
    except (OverflowError, ValueError) as exc:
        raise DurationError(f"{name} {value!r} is too long to be a duration") from exc
