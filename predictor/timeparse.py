"""Times and durations as users type them: ISO 8601 instants and durations (bare numbers are seconds).

pandas is imported inside the functions that return its types: the node agents (``collect``,
``xdp agent``) parse durations too and must start without it (``parse_seconds``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from models import durations
from predictor.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["parse_duration", "parse_seconds", "parse_time"]


def parse_seconds(text: str, *, name: str = "duration") -> float:
    """``"1m"``, ``"1h30m"``, ``"90s"`` or plain seconds (``"60"``) → seconds (> 0), without pandas."""
    try:
        return durations.duration_ns(text, name=name) / 1e9
    except durations.DurationError as exc:
        raise InputError(str(exc)) from exc


def parse_duration(text: str, *, name: str = "duration") -> pd.Timedelta:
    """``"1m"``, ``"1h30m"``, ``"5min"`` or plain seconds (``"60"``) → Timedelta (> 0).

    The grammar is ``models.durations`` (shared with the forecasters' ``freq``); here a bad value is an
    ``InputError``, so the CLI prints it as one line.
    """
    try:
        return durations.parse_duration(text, name=name)
    except durations.DurationError as exc:
        raise InputError(str(exc)) from exc


def parse_time(text: str, *, name: str = "time") -> pd.Timestamp:
    """An ISO 8601 instant (naive means UTC) or a Unix timestamp in seconds → UTC Timestamp."""
    import pandas as pd

    from predictor.bounds import check_time

    raw = text.strip()
    try:
        if re.fullmatch(r"\d+(\.\d+)?", raw):
            stamp = pd.Timestamp(float(raw), unit="s", tz="UTC")
        else:
            stamp = pd.Timestamp(raw)
    except (ValueError, OverflowError) as exc:
        raise InputError(f"{name} {text!r} is not an ISO 8601 time (example: 2026-11-01T00:00:00Z)") from exc
    if pd.isna(stamp):
        raise InputError(f"{name} {text!r} is not an ISO 8601 time (example: 2026-11-01T00:00:00Z)")
    return check_time(stamp, name)
