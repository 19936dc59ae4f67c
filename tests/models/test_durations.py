"""The one duration grammar: what a user may type for a step, an interval, a window or a forecaster's grid."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest

from models.durations import DurationError, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("60", pd.Timedelta(seconds=60)),  # a bare number is seconds, as Prometheus' step= and k8s *Seconds
        ("0.5", pd.Timedelta(milliseconds=500)),
        ("300s", pd.Timedelta(minutes=5)),
        ("1m", pd.Timedelta(minutes=1)),
        ("5min", pd.Timedelta(minutes=5)),
        ("1h", pd.Timedelta(hours=1)),
        ("1h30m", pd.Timedelta(minutes=90)),
        ("1.5h", pd.Timedelta(minutes=90)),
        ("1D", pd.Timedelta(days=1)),
        ("2d12h", pd.Timedelta(hours=60)),
        ("2W", pd.Timedelta(weeks=2)),
        ("1w", pd.Timedelta(weeks=1)),
        ("1y", pd.Timedelta(days=365)),
        ("250ms", pd.Timedelta(milliseconds=250)),
        (" 30s ", pd.Timedelta(seconds=30)),
    ],
)
def test_valid_durations(text: str, expected: pd.Timedelta) -> None:
    assert parse_duration(text) == expected


def test_numbers_are_seconds_and_timedeltas_pass_through() -> None:
    assert parse_duration(60) == parse_duration(60.0) == pd.Timedelta(minutes=1)
    assert parse_duration(timedelta(minutes=5)) == parse_duration(pd.Timedelta("5min")) == pd.Timedelta(minutes=5)


@pytest.mark.parametrize(
    "text",
    ["", "abc", "1 minute", "1M", "5x", "h", "-5", "-5s", "1e3", "30m1h", "1d1D", "1h 30m", "1T", "P1D", "00:05:00"],
)
def test_bad_input_is_one_clear_error_naming_the_input(text: str) -> None:
    with pytest.raises(DurationError) as caught:
        parse_duration(text, name="--step")
    message = str(caught.value)
    assert message.startswith(f"--step {text!r} is not a duration") and "\n" not in message
    assert "60 (seconds)" in message  # says what a bare number means


@pytest.mark.parametrize("value", ["0", "0s", "0h0m", 0, timedelta(0), pd.Timedelta(-1, unit="s")])
def test_zero_or_negative_is_refused(value: object) -> None:
    with pytest.raises(DurationError, match="must be longer than zero"):
        parse_duration(value, name="--interval")  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), True, None, ["1h"]])
def test_non_durations_of_other_types_are_refused(value: object) -> None:
    with pytest.raises(DurationError, match="is not a duration"):
        parse_duration(value)  # type: ignore[arg-type]


def test_a_duration_too_long_for_a_timedelta_is_refused() -> None:
    with pytest.raises(DurationError, match="'99999999999y' is too long"):
        parse_duration("99999999999y")
