"""A minimal OpenMetrics writer for tests: gauges with exact, known samples."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from predictor.sources.promql import escape_label_value


@dataclass
class Series:
    metric: str
    labels: Mapping[str, str]
    samples: list[tuple[int, float]] = field(default_factory=list)  # (unix seconds, value)


def _format_value(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def write_openmetrics(series: Iterable[Series], path: Path) -> Path:
    by_metric: dict[str, list[Series]] = {}
    for item in series:
        by_metric.setdefault(item.metric, []).append(item)
    with path.open("w", encoding="utf-8") as out:
        for metric, members in by_metric.items():
            out.write(f"# TYPE {metric} gauge\n")
            for member in members:
                labels = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in sorted(member.labels.items()))
                head = f"{metric}{{{labels}}}" if labels else metric
                for stamp, value in sorted(member.samples):
                    out.write(f"{head} {_format_value(value)} {stamp}\n")
        out.write("# EOF\n")
    return path
