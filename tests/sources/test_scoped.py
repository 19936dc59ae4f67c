"""``scope_query``: every vector selector gets the cluster matcher; nothing else in the query changes.

A missed selector would read every cluster's series through the central store (equal queue names merge),
a touched string, label list or duration would change what the query means. Random queries are built
together with the text they must become, so the property needs no second PromQL parser; the project's
own queries are checked for "only additions" here and for being answered identically by a real central
store in ``tests/sources/test_central_store.py``.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predictor.errors import InputError
from predictor.sources.promql import Matcher, Selector
from predictor.sources.queries import (
    CATALOGUE,
    WORKLOAD,
    fresh_pod_samples,
    node_network_bps,
    per_pod_max,
    series_count,
)
from predictor.sources.scoped import scope_query

# Every query the project sends to Prometheus outside the loop's own modules.
PROJECT_QUERIES = {
    **CATALOGUE, **WORKLOAD,
    "fresh_pod_samples": fresh_pod_samples("DCGM_FI_DEV_FB_USED", 300),
    "per_pod_max": per_pod_max(Selector("DCGM_FI_DEV_FB_USED").where("pod", "", "!="), 3600),
    "series_count": series_count("kube_pod_labels"),
    "node_network_bps": node_network_bps("receive"),
    "diagnose_family": str(Selector("DCGM_FI_DEV_GPU_TEMP")),
}

_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)
_DURATION = st.sampled_from(["5m", "1h", "30s", "1d", "90s"])


@st.composite
def _selector(draw: st.DrawFn, added: str) -> tuple[str, str]:
    """A selector and what it becomes once ``added`` is put in front of its matchers."""
    metric = "m_" + draw(_NAME)
    matchers = draw(st.lists(st.builds(Matcher, _NAME.map(lambda n: "l_" + n), _TEXT,
                                       st.sampled_from(["=", "!=", "=~", "!~"])), max_size=3))
    inner = ",".join(m.render() for m in matchers)
    if draw(st.booleans()) and not matchers:
        return metric, f"{metric}{{{added}}}"
    if draw(st.integers(0, 5)) == 0:  # no metric name: {__name__="…"}
        named = Matcher("__name__", metric).render() + ("," + inner if inner else "")
        return f"{{{named}}}", f"{{{added},{named}}}"
    return f"{metric}{{{inner}}}", f"{metric}{{{added}{',' + inner if inner else ''}}}"


@st.composite
def _expr(draw: st.DrawFn, added: str, depth: int = 3) -> tuple[str, str]:
    """A random PromQL expression over random selectors, and the same expression with every selector scoped."""
    kind = draw(st.integers(0, 8 if depth > 0 else 1))
    if kind == 0:
        return draw(_selector(added))
    if kind == 1:
        number = draw(st.sampled_from(["3", "1e3", "0.5", "0x1f", "Inf"]))
        return number, number
    if kind == 2:
        query, scoped = draw(_selector(added))
        duration, func = draw(_DURATION), draw(st.sampled_from(["rate", "max_over_time", "increase"]))
        offset = draw(st.sampled_from(["", " offset 1h", " offset -5m"]))
        return f"{func}({query}[{duration}]{offset})", f"{func}({scoped}[{duration}]{offset})"
    left, left_scoped = draw(_expr(added, depth - 1))
    if kind == 3:
        labels = ", ".join(draw(st.lists(_NAME, min_size=1, max_size=3)))
        agg, mod = draw(st.sampled_from(["sum", "max", "count", "avg"])), draw(st.sampled_from(["by", "without"]))
        if draw(st.booleans()):
            return f"{agg} {mod} ({labels}) ({left})", f"{agg} {mod} ({labels}) ({left_scoped})"
        return f"{agg}({left}) {mod} ({labels})", f"{agg}({left_scoped}) {mod} ({labels})"
    if kind == 4:
        strings = [draw(_TEXT).replace("\\", "\\\\").replace('"', '\\"') for _ in range(3)]
        label = draw(_NAME)
        tail = f'"{strings[0]}", "${strings[1]}", "{label}", "{strings[2]}"'
        return f"label_replace({left}, {tail})", f"label_replace({left_scoped}, {tail})"
    if kind == 5:
        step = draw(_DURATION)
        return f"({left})[1h:{step}]", f"({left_scoped})[1h:{step}]"
    if kind == 6:
        return f"{left} offset 1h", f"{left_scoped} offset 1h"
    right, right_scoped = draw(_expr(added, depth - 1))
    op = draw(st.sampled_from([
        "+", "*", "/", "and", "or", "unless", "> bool", "== bool", "* on(namespace, pod) group_left(l_x)",
        "/ ignoring(l_y) group_right()", "atan2",
    ]))
    return f"{left} {op} {right}", f"{left_scoped} {op} {right_scoped}"


@given(data=st.data(), value=_TEXT, label=st.sampled_from(["cluster", "k8s_cluster", "region"]))
def test_every_selector_of_a_random_query_is_scoped_and_nothing_else_changes(
        data: st.DataObject, value: str, label: str) -> None:
    added = Matcher(label, value).render()
    query, expected = data.draw(_expr(added))
    assert scope_query(query, {label: value}) == expected


@pytest.mark.parametrize("name", sorted(PROJECT_QUERIES))
@settings(max_examples=20)
@given(value=_TEXT)
def test_project_queries_only_gain_the_matcher(name: str, value: str) -> None:
    query = PROJECT_QUERIES[name]
    added = Matcher("cluster", value).render()
    scoped = scope_query(query, {"cluster": value})
    # Removing what was added gives the query back: strings, label lists and durations are untouched.
    assert scoped.replace("{" + added + "}", "").replace(added + ",", "") == query
    # Every metric name in the query (identifiers outside strings and label lists) now carries the matcher.
    metric_names = re.findall(r"\b(?:kube_|DCGM_|volcano_|node_network)\w*", re.sub(r'"(?:[^"\\]|\\.)*"', "", query))
    assert scoped.count(added) == len(metric_names) > 0


def test_no_matchers_leaves_the_query_alone() -> None:
    assert scope_query(CATALOGUE["queue_demand"], {}) == CATALOGUE["queue_demand"]


def test_unterminated_selector_is_one_line_error() -> None:
    with pytest.raises(InputError, match="unterminated"):
        scope_query('up{job="x"', {"cluster": "a"})
