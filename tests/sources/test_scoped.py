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

from predictor.errors import InputError
from predictor.sources.promql import Matcher
from predictor.sources.queries import CATALOGUE
from predictor.sources.scoped import scope_query
from tests.support.scoped_queries import PROJECT_QUERIES, TEXT, random_scoped_queries


@given(case=random_scoped_queries())
def test_every_selector_of_a_random_query_is_scoped_and_nothing_else_changes(
    case: tuple[str, dict[str, str], str],
) -> None:
    query, matchers, expected = case
    assert scope_query(query, matchers) == expected


@pytest.mark.parametrize("name", sorted(PROJECT_QUERIES))
@settings(max_examples=20)
@given(value=TEXT)
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


def test_comments_are_left_alone() -> None:
    query = 'sum(up) # per job: {job} and up\n+ sum(x{a="#"})'
    assert scope_query(query, {"cluster": "a"}) == (
        'sum(up{cluster="a"}) # per job: {job} and up\n+ sum(x{cluster="a",a="#"})'
    )
    assert scope_query("sum # all\n (up)", {"cluster": "a"}) == 'sum # all\n (up{cluster="a"})'
