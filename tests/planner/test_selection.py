"""Which queues the loop manages: opt-in by annotation or label selector; managed=false always opts out."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from predictor.planner import queues_from_list
from predictor.planner.selection import ManagedQueues


def queue(
    name: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels or {}, "annotations": annotations or {}}
    return {"kind": "Queue", "metadata": meta, "spec": {"deserved": {"nvidia.com/gpu": "4"}}}


QUEUES = [
    queue("plain"),
    queue("opted-in", annotations={"gpu-capacity-predictor/managed": "true"}),
    queue("labelled", labels={"team": "ml", "tier": "gpu"}),
    queue("opted-out", labels={"team": "ml"}, annotations={"gpu-capacity-predictor/managed": "false"}),
    queue("other-team", labels={"team": "web"}),
]


def managed(manage: ManagedQueues) -> list[str]:
    return [q.name for q in queues_from_list(QUEUES, manage=manage) if q.managed]


def test_opt_in_by_default_only_annotated_queues_are_managed() -> None:
    assert managed(ManagedQueues()) == ["opted-in"]


def test_a_label_selector_opts_queues_in_but_never_an_opted_out_one() -> None:
    assert managed(ManagedQueues(selector="team=ml")) == ["opted-in", "labelled"]
    assert managed(ManagedQueues(selector="team in (ml, web),!legacy")) == ["opted-in", "labelled", "other-team"]
    assert managed(ManagedQueues(selector="team!=ml")) == ["plain", "opted-in", "other-team"]
    assert managed(ManagedQueues(selector="tier")) == ["opted-in", "labelled"]
    assert managed(ManagedQueues(selector="team notin (ml)")) == ["plain", "opted-in", "other-team"]


def test_all_manages_every_queue_except_the_opted_out_one() -> None:
    assert managed(ManagedQueues(all=True)) == ["plain", "opted-in", "labelled", "other-team"]
    # Without a selection (the planner's own callers, the replay): the old behaviour, every queue.
    assert [q.name for q in queues_from_list(QUEUES) if q.managed] == ["plain", "opted-in", "labelled", "other-team"]


def test_a_custom_annotation_opts_in_and_the_old_one_still_opts_out() -> None:
    custom = ManagedQueues(annotation="example.com/capacity")
    qs = [
        queue("a", annotations={"example.com/capacity": "true"}),
        queue("b", annotations={"example.com/capacity": "false"}),
    ]
    assert [q.name for q in queues_from_list(qs, manage=custom) if q.managed] == ["a"]


@pytest.mark.parametrize("selector", ["team in (a", "team = = x", "=x"])
def test_a_bad_selector_is_refused(selector: str) -> None:
    with pytest.raises(ValidationError, match="label selector"):
        ManagedQueues(selector=selector)
