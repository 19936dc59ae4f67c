"""PromQL built from a selector model, with every label value escaped.

A queue or namespace name comes from users of the cluster; pasted into a query unescaped, a value like
``a"} or vector(1) #`` would change what the query means. Here values only ever reach PromQL as quoted
string literals with backslash, quote and control characters escaped, and names are validated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from predictor.errors import InputError
from predictor.names import is_label_name, is_metric_name

__all__ = ["Matcher", "Selector", "escape_label_value", "series_id"]

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}

MatchOp = Literal["=", "!=", "=~", "!~"]


def escape_label_value(value: str) -> str:
    """Escape a value for a double-quoted PromQL string (and the Prometheus text format)."""
    out = []
    for char in value:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return "".join(out)


@dataclass(frozen=True)
class Matcher:
    """One label matcher: ``name op "value"``."""

    name: str
    value: str
    op: MatchOp = "="

    def __post_init__(self) -> None:
        if not is_label_name(self.name):
            raise InputError(f"invalid label name {self.name!r} in a selector")
        if self.op not in ("=", "!=", "=~", "!~"):
            raise InputError(f"invalid match operator {self.op!r} for label {self.name!r}")

    def render(self) -> str:
        return f'{self.name}{self.op}"{escape_label_value(self.value)}"'


@dataclass(frozen=True)
class Selector:
    """``metric{matchers}``: the only way the project builds series selectors."""

    metric: str
    matchers: tuple[Matcher, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not is_metric_name(self.metric):
            raise InputError(f"invalid metric name {self.metric!r}")

    @classmethod
    def of(cls, metric: str, labels: Mapping[str, str] | None = None, **equal: str) -> Selector:
        """Exact-match selector: ``Selector.of("up", job="a")`` or with a mapping for odd label names."""
        merged = {**(labels or {}), **equal}
        return cls(metric, tuple(Matcher(k, v) for k, v in sorted(merged.items())))

    def where(self, name: str, value: str, op: MatchOp = "=") -> Selector:
        """A copy with one more matcher."""
        return Selector(self.metric, (*self.matchers, Matcher(name, value, op)))

    def render(self) -> str:
        if not self.matchers:
            return self.metric
        return f"{self.metric}{{{','.join(m.render() for m in self.matchers)}}}"

    def __str__(self) -> str:
        return self.render()


def series_id(labels: Mapping[str, str]) -> str:
    """Prometheus text form of a series: ``name{a="x",b="y"}`` with labels sorted and values escaped."""
    name = labels.get("__name__", "")
    rest = sorted((k, v) for k, v in labels.items() if k != "__name__")
    inner = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in rest)
    return f"{name}{{{inner}}}" if rest or not name else name
