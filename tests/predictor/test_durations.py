"""The command line and the forecasters read a duration the same way (one grammar, ``models.durations``)."""

from __future__ import annotations

import pandas as pd
import pytest

from models.forecast import ForecastInputError, parse_freq, regularize
from models.frames import ID, TIME, VALUE
from predictor.errors import InputError
from predictor.timeparse import parse_duration


@pytest.mark.parametrize("text", ["60", "300s", "5min", "1h", "1h30m", "1D"])
def test_flags_and_forecaster_grids_agree(text: str) -> None:
    assert parse_duration(text) == parse_freq(text)


def test_sixty_is_sixty_seconds_in_both_places() -> None:
    assert parse_duration("60", name="--step") == parse_freq("60") == pd.Timedelta(seconds=60)


def test_a_bare_number_grid_regularizes_a_minute_series() -> None:
    times = pd.date_range("2026-11-01", periods=4, freq="min", tz="UTC")
    frame = pd.DataFrame({ID: "a", TIME: times.delete(2), VALUE: [1.0, 2.0, 4.0]})
    (series,) = regularize(frame, "60")
    assert series.freq == pd.Timedelta(minutes=1) and series.observed.tolist() == [True, True, False, True]


def test_bad_input_is_the_same_one_line_in_both_places() -> None:
    with pytest.raises(InputError) as flag:
        parse_duration("1 minute", name="--step")
    with pytest.raises(ForecastInputError) as freq:
        parse_freq("1 minute")
    assert str(flag.value).startswith("--step '1 minute' is not a duration")
    assert str(freq.value).startswith("frequency '1 minute' is not a duration")
    assert str(flag.value).split(" is ", 1)[1] == str(freq.value).split(" is ", 1)[1]
