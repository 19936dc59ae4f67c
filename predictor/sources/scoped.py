"""Read one cluster out of a central store: every selector of a query narrowed to ``{cluster="a"}``.

A central Prometheus (remote-write receiver, Thanos, Mimir) holds many clusters' series, told apart by a
label its senders add (``external_labels``). The project's queries are written for one cluster
(``sum by (queue_name)``), so a query sent there unchanged would merge equal queue names of different
clusters. ``ScopedSource`` adds the cluster matcher to every vector selector of the query (what
prom-label-proxy does with the PromQL parser; here a tokenizer that knows PromQL's lexical rules is
enough, because label lists, strings, durations and function names are the only other things an
identifier can be) and drops the label from the answer, so reading cluster ``a`` through the central
store gives the frame that ``a``'s own Prometheus gives.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pandas as pd

from models.frames import ID, TIME, VALUE
from predictor.errors import InputError
from predictor.names import METRIC_NAME
from predictor.sources.promql import Matcher, series_id

if TYPE_CHECKING:
    from predictor.sources import MetricSource

__all__ = ["ScopedSource", "scope_query"]

_TOKEN = re.compile(
    r"""(?P<space>\s+)
      | (?P<comment>\#[^\n]*)
      | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
      | (?P<braces>\{(?:[^}"'`]|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)*\})
      | (?P<brackets>\[[^\]]*\])
      | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?:[a-zA-Z]+\d*)*)
      | (?P<ident>"""
    + METRIC_NAME
    + r""")
      | (?P<other>.)""",
    re.VERBOSE | re.DOTALL,
)
# Keywords after which a parenthesised list of label names follows (not selectors).
_LABEL_LIST = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
# Words that are never metric names in an expression position.
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"}) | _LABEL_LIST


def scope_query(query: str, matchers: Mapping[str, str]) -> str:
    """``query`` with ``name="value"`` matchers added to every vector selector (values escaped)."""
    if not matchers:
        return query
    added = ",".join(Matcher(name, value).render() for name, value in sorted(matchers.items()))
    tokens = _tokens(query)
    out: list[str] = []
    index, in_label_list = 0, False
    while index < len(tokens):
        kind, text = tokens[index]
        following = _next_significant(tokens, index + 1)
        if kind == "ident" and text.lower() in _LABEL_LIST:
            in_label_list = following is not None and tokens[following][1] == "("
            out.append(text)
        elif in_label_list:
            out.append(text)
            if text == ")":
                in_label_list = False
        elif kind == "ident" and text.lower() not in _KEYWORDS and not _opens_call(tokens, following):
            out.append(text)
            if following is not None and tokens[following][0] == "braces":
                out.extend(t for _, t in tokens[index + 1 : following])
                out.append(_with_matchers(tokens[following][1], added))
                index = following
            else:
                out.append("{" + added + "}")
        elif kind == "braces":  # a selector without a metric name: {__name__=~"…"}
            out.append(_with_matchers(text, added))
        else:
            out.append(text)
        if kind == "ident" and text.lower() == "offset" and following is not None:
            out.extend(t for _, t in tokens[index + 1 : following + 1])  # the duration is not a selector
            index = following
        index += 1
    return "".join(out)


def _tokens(query: str) -> list[tuple[str, str]]:
    tokens = []
    for match in _TOKEN.finditer(query):
        kind = match.lastgroup or "other"
        if kind == "other" and match.group() in "\"'`{":
            raise InputError(f"query {query!r} has an unterminated string or selector")
        tokens.append((kind, match.group()))
    return tokens


def _opens_call(tokens: list[tuple[str, str]], following: int | None) -> bool:
    """A function or an aggregation follows: ``name(`` or ``sum by (…)`` / ``sum without (…)``."""
    if following is None:
        return False
    text = tokens[following][1]
    return text == "(" or text.lower() in ("by", "without")


def _next_significant(tokens: list[tuple[str, str]], start: int) -> int | None:
    for index in range(start, len(tokens)):
        if tokens[index][0] not in ("space", "comment"):
            return index
    return None


def _with_matchers(braces: str, added: str) -> str:
    inner = braces[1:-1].strip().rstrip(",")
    return "{" + (f"{added},{inner}" if inner else added) + "}"


class ScopedSource:
    """A ``MetricSource`` that reads only the series whose labels equal ``matchers`` and hides those labels."""

    def __init__(self, source: MetricSource, matchers: Mapping[str, str]) -> None:
        self.source, self.matchers = source, dict(matchers)

    def query_range(self, query: str, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta) -> pd.DataFrame:
        frame = self.source.query_range(scope_query(query, self.matchers), start, end, step)
        return self._unscoped(frame)

    def _unscoped(self, frame: pd.DataFrame) -> pd.DataFrame:
        present = [name for name in self.matchers if name in frame.columns]
        if not present:
            return frame
        labels = [c for c in frame.columns if c not in (ID, TIME, VALUE, *present)]
        if frame.empty:
            return frame.drop(columns=present)
        # One new name per series (the old name is unique per series), not one per sample.
        first = frame.drop_duplicates(ID)
        renamed = {
            old: series_id({k: v for k, v in zip(labels, row, strict=True) if isinstance(v, str)})
            for old, row in zip(first[ID], first[labels].itertuples(index=False, name=None), strict=True)
        }
        frame = frame.drop(columns=present).assign(**{ID: frame[ID].map(renamed)})
        return frame.sort_values([ID, TIME], kind="stable").reset_index(drop=True)
