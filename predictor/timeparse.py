"""Times and durations as users type them: ISO 8601 instants and Prometheus-style durations."""

from __future__ import annotations

import re

import pandas as pd

from predictor.bounds import check_time
from predictor.errors import InputError

__all__ = ["parse_duration", "parse_time"]

_DURATION_PART = re.compile(r"(\d+)(ms|y|w|d|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def parse_duration(text: str, *, name: str = "duration") -> pd.Timedelta:
    """``"1m"``, ``"1h30m"``, ``"90s"`` or plain seconds (``"60"``) → Timedelta (> 0)."""
    raw = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        seconds = float(raw)
    else:
        parts = _DURATION_PART.findall(raw)
        if not parts or "".join(n + u for n, u in parts) != raw:
            raise InputError(f"{name} {text!r} is not a duration (examples: 30s, 1m, 1h30m)")
        seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in parts)
    if seconds <= 0:
        raise InputError(f"{name} {text!r} must be longer than zero")
    return pd.Timedelta(seconds=seconds)


def parse_time(text: str, *, name: str = "time") -> pd.Timestamp:
    """An ISO 8601 instant (naive means UTC) or a Unix timestamp in seconds → UTC Timestamp."""
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
