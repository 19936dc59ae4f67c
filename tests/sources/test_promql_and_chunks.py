"""Pure parts of the data layer: selector rendering/escaping and the chunk grid."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from predictor.errors import InputError
from predictor.sources.prometheus import chunk_ranges
from predictor.sources.promql import Matcher, Selector, escape_label_value, series_id

# Characters a JSON decoder and PromQL agree on: printable text plus \n, \r, \t, quotes, backslashes.
label_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x0b\x0c").filter(
        lambda c: ord(c) >= 0x20 or c in "\n\r\t"
    ),
    max_size=40,
)


@given(label_text)
def test_escaped_value_decodes_back_to_itself(value: str) -> None:
    # PromQL double-quoted strings use Go escapes; for these characters JSON decodes them the same way.
    assert json.loads(f'"{escape_label_value(value)}"') == value


@given(label_text)
def test_rendered_matcher_has_exactly_two_unescaped_quotes(value: str) -> None:
    rendered = Matcher("queue", value).render()
    unescaped = 0
    i = 0
    while i < len(rendered):
        if rendered[i] == "\\":
            i += 2
            continue
        unescaped += rendered[i] == '"'
        i += 1
    assert unescaped == 2
    assert "\n" not in rendered


def test_selector_renders_sorted_exact_matchers() -> None:
    assert Selector.of("up", job="b", instance="a").render() == 'up{instance="a",job="b"}'
    assert Selector.of("up").render() == "up"
    assert Selector("x").where("q", "a.*", "=~").render() == 'x{q=~"a.*"}'


@pytest.mark.parametrize("bad", ["1up", "up-time", "up{}", ""])
def test_bad_metric_names_are_refused(bad: str) -> None:
    with pytest.raises(InputError, match="invalid metric name"):
        Selector(bad)


@pytest.mark.parametrize("bad", ["queue-name", "a b", "}"])
def test_bad_label_names_are_refused(bad: str) -> None:
    with pytest.raises(InputError, match="invalid label name"):
        Selector.of("up", {bad: "x"})


def test_series_id_is_prometheus_text_form() -> None:
    assert series_id({"__name__": "up", "job": "b", "instance": "a"}) == 'up{instance="a",job="b"}'
    assert series_id({"__name__": "up"}) == "up"
    assert series_id({"queue": 'q"1'}) == '{queue="q\\"1"}'
    assert series_id({}) == "{}"


@given(
    start_s=st.integers(0, 10**6),
    points=st.integers(1, 3_000),
    step_s=st.integers(1, 3600),
    max_points=st.integers(2, 4_000),
)
def test_chunks_tile_the_grid_without_overlap(start_s: int, points: int, step_s: int, max_points: int) -> None:
    start = pd.Timestamp(start_s, unit="s", tz="UTC")
    step = pd.Timedelta(seconds=step_s)
    end = start + step * (points - 1)
    chunks = chunk_ranges(start, end, step, max_points)
    grid: list[pd.Timestamp] = []
    for lo, hi in chunks:
        n = (hi - lo) // step + 1
        assert n <= max_points
        assert (lo - start) % step == pd.Timedelta(0)
        grid += [lo + k * step for k in range(n)]
    assert len(grid) == points == len(set(grid))
    assert grid[0] == start and grid[-1] == end


def test_end_before_start_is_an_input_error() -> None:
    start = pd.Timestamp("2026-01-02", tz="UTC")
    with pytest.raises(InputError, match="before start"):
        chunk_ranges(start, start - pd.Timedelta("1h"), pd.Timedelta("1min"), 100)
