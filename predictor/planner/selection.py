"""Which Volcano queues the loop manages: opt-in by an annotation and/or a label selector.

A planner that resizes every queue it can see is hard to adopt: the first install would act on queues
nobody asked it to touch. So a queue is managed only when it opts in (the annotation, or labels matching
the selector); ``all: true`` keeps the old behaviour for the demo, the simulator and whole-cluster
installs. The old opt-out annotation ``gpu-capacity-predictor/managed: "false"`` always wins. The label
selector is the Kubernetes syntax (``team=ml,tier in (a,b),!legacy``), parsed here so the pure planner
needs no client library.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["MANAGED_ANNOTATION", "ManagedQueues", "parse_selector"]

MANAGED_ANNOTATION = "gpu-capacity-predictor/managed"
Labels = Mapping[str, str]
Term = Callable[[Labels], bool]
# One term of a label selector: ``key in (a,b)``, ``key notin (a,b)``, ``key=v``, ``key==v``, ``key!=v``,
# ``key`` (exists) or ``!key`` (does not exist).
_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_SET = re.compile(rf"^\s*(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)\s*$")
_EQ = re.compile(rf"^\s*(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>[-A-Za-z0-9_.]*)\s*$")
_EXISTS = re.compile(rf"^\s*(?P<neg>!?)\s*(?P<key>{_KEY})\s*$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas outside parentheses (``a in (x,y),b`` is two terms)."""
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [t for t in terms if t.strip()]


def _term(text: str) -> Term:
    if match := _SET.match(text):
        key, values = match["key"], {v.strip() for v in match["values"].split(",") if v.strip()}
        if match["op"] == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if match := _EQ.match(text):
        key, value = match["key"], match["value"]
        if match["op"] == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if match := _EXISTS.match(text):
        key, negated = match["key"], bool(match["neg"])
        return lambda labels: (key in labels) != negated
    raise ValueError(f"not a label selector term: {text.strip()!r}")


def parse_selector(selector: str) -> list[Term]:
    """The terms of a Kubernetes label selector (all must hold); ``ValueError`` naming a bad term."""
    return [_term(t) for t in _split_terms(selector)]


class ManagedQueues(BaseModel):
    """Which queues are managed (``actuators.queues.manage``). Opt-in: a queue with neither the annotation
    nor matching labels is left alone."""

    model_config = ConfigDict(extra="forbid")

    all: bool = Field(
        False,
        description="Manage every queue (except those annotated managed=false); the demo and the simulator "
        "set it. Off by default: queues opt in.",
    )
    annotation: str = Field(
        MANAGED_ANNOTATION,
        min_length=1,
        description='Annotation that opts a queue in with the value "true" (opts it out with "false").',
    )
    selector: str = Field(
        "",
        description="Label selector that opts queues in, Kubernetes syntax (e.g. 'team in (a,b),tier=gpu'); "
        "empty: labels opt nothing in.",
    )

    @field_validator("selector")
    @classmethod
    def _valid_selector(cls, value: str) -> str:
        parse_selector(value)
        return value

    def manages(self, labels: Labels, annotations: Mapping[str, object]) -> bool:
        """Whether a queue with these labels and annotations is managed."""
        said = str(annotations.get(self.annotation, "")).strip().lower()
        old = str(annotations.get(MANAGED_ANNOTATION, "")).strip().lower()
        if "false" in (said, old):  # an explicit opt-out always wins
            return False
        if self.all or said == "true":
            return True
        if self.selector:
            return all(term(labels) for term in parse_selector(self.selector))
        return False


# Manage every queue unless annotated managed=false: what parsing does when no selection is given (the
# planner's own tests, the replay, offline tools handed a list of queues to plan).
MANAGE_ALL = ManagedQueues(all=True)
