"""Random valid PromQL built together with its cluster-scoped text, and every query the project sends.

Shared by ``tests/sources/test_scoped.py`` (the tokenizer) and ``tests/sources/test_central_store.py`` (a real
Prometheus accepts both forms, and answers the project's queries per cluster).
"""

from __future__ import annotations

from hypothesis import strategies as st

from predictor.sources.promql import Matcher, MatchOp, Selector, escape_label_value
from predictor.sources.queries import (
    CATALOGUE,
    WORKLOAD,
    fresh_pod_samples,
    node_network_bps,
    per_pod_max,
    series_count,
)

__all__ = ["PROJECT_QUERIES", "TEXT", "random_scoped_queries"]

# Every query the project sends to Prometheus outside the loop's own modules.
PROJECT_QUERIES = {
    **CATALOGUE,
    **WORKLOAD,
    "fresh_pod_samples": fresh_pod_samples("DCGM_FI_DEV_FB_USED", 300),
    "per_pod_max": per_pod_max(Selector("DCGM_FI_DEV_FB_USED").where("pod", "", "!="), 3600),
    "series_count": series_count("kube_pod_labels"),
    "node_network_bps": node_network_bps("receive"),
    "diagnose_family": str(Selector("DCGM_FI_DEV_GPU_TEMP")),
}

_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)
_REGEX = st.from_regex(r"[a-z0-9.|]{0,4}(\.\*)?", fullmatch=True)  # always a valid RE2 pattern
_DURATION = st.sampled_from(["5m", "1h", "30s", "1d", "90s"])
Scoped = tuple[str, str, bool]  # query, what it must become, whether it is a vector (else a scalar)


def _string(text: str) -> str:
    return f'"{escape_label_value(text)}"'


@st.composite
def _matcher(draw: st.DrawFn) -> Matcher:
    ops: list[MatchOp] = ["=", "!=", "=~", "!~"]
    op = draw(st.sampled_from(ops))
    return Matcher("l_" + draw(_NAME), draw(TEXT if op in ("=", "!=") else _REGEX), op)


@st.composite
def _selector(draw: st.DrawFn, added: str) -> tuple[str, str]:
    """A selector and what it becomes once ``added`` is put in front of its matchers."""
    metric = "m_" + draw(_NAME)
    matchers = draw(st.lists(_matcher(), max_size=3))
    inner = ",".join(m.render() for m in matchers)
    if draw(st.booleans()) and not matchers:
        return metric, f"{metric}{{{added}}}"
    if draw(st.integers(0, 5)) == 0:  # no metric name: {__name__="…"}
        named = Matcher("__name__", metric).render() + ("," + inner if inner else "")
        return f"{{{named}}}", f"{{{added},{named}}}"
    return f"{metric}{{{inner}}}", f"{metric}{{{added}{',' + inner if inner else ''}}}"


@st.composite
def _vector(draw: st.DrawFn, added: str, depth: int) -> tuple[str, str]:
    query, scoped, vector = draw(_expr(added, depth))
    return (query, scoped) if vector else draw(_selector(added))


@st.composite
def _expr(draw: st.DrawFn, added: str, depth: int = 3) -> Scoped:
    """A random valid PromQL expression over random selectors, and the same with every selector scoped."""
    kind = draw(st.integers(0, 8 if depth > 0 else 2))
    if kind == 0:
        return (*draw(_selector(added)), True)
    if kind == 1:
        number = draw(st.sampled_from(["3", "1e3", "0.5", "0x1f", "Inf"]))
        return number, number, False
    if kind == 2:
        query, scoped = draw(_selector(added))
        duration, func = draw(_DURATION), draw(st.sampled_from(["rate", "max_over_time", "increase"]))
        offset = draw(st.sampled_from(["", " offset 1h", " offset 90s"]))
        return f"{func}({query}[{duration}]{offset})", f"{func}({scoped}[{duration}]{offset})", True
    if kind == 6:
        query, scoped = draw(_selector(added))
        return f"{query} offset 1h", f"{scoped} offset 1h", True
    left, left_scoped = draw(_vector(added, depth - 1))
    if kind == 3:
        labels = ", ".join("g_" + name for name in draw(st.lists(_NAME, min_size=1, max_size=3)))
        agg, mod = draw(st.sampled_from(["sum", "max", "count", "avg"])), draw(st.sampled_from(["by", "without"]))
        if draw(st.booleans()):
            return f"{agg} {mod} ({labels}) ({left})", f"{agg} {mod} ({labels}) ({left_scoped})", True
        return f"{agg}({left}) {mod} ({labels})", f"{agg}({left_scoped}) {mod} ({labels})", True
    if kind == 4:
        tail = f'"d_{draw(_NAME)}", {_string("$" + draw(TEXT))}, "{draw(_NAME)}", {_string(draw(_REGEX))}'
        return f"label_replace({left}, {tail})", f"label_replace({left_scoped}, {tail})", True
    if kind == 5:
        step = draw(_DURATION)
        return f"max_over_time(({left})[1h:{step}])", f"max_over_time(({left_scoped})[1h:{step}])", True
    op = draw(
        st.sampled_from(
            [
                "+",
                "*",
                "/",
                "and",
                "or",
                "unless",
                "> bool",
                "== bool",
                "* on(namespace, pod) group_left(l_x)",
                "/ ignoring(l_y) group_right()",
                "atan2",
            ]
        )
    )
    if op in ("+", "*", "/", "> bool", "== bool") and draw(st.booleans()):
        right, right_scoped, _ = draw(_expr(added, depth - 1))  # a scalar is fine on one side of arithmetic
    else:
        right, right_scoped = draw(_vector(added, depth - 1))
    return f"{left} {op} {right}", f"{left_scoped} {op} {right_scoped}", True


def random_scoped_queries() -> st.SearchStrategy[tuple[str, dict[str, str], str]]:
    """``(query, matchers, expected scoped query)`` over random valid PromQL (also sent to a real server)."""

    @st.composite
    def draw_one(draw: st.DrawFn) -> tuple[str, dict[str, str], str]:
        label, value = draw(st.sampled_from(["cluster", "k8s_cluster", "region"])), draw(TEXT)
        query, expected, _ = draw(_expr(Matcher(label, value).render()))
        return query, {label: value}, expected

    return draw_one()
