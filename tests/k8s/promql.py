"""Every PromQL expression the manifests carry, ready to run against a test Prometheus.

The dashboard's Grafana variables are replaced by what Grafana would send for "All" (``.*``) and by a
rate window suited to the 5-minute step of the simulated history. A backfilled Prometheus evaluates
no rules, so a recording rule's name inside another expression is replaced by its own expression
(recursively; ``name[12h]`` becomes a subquery), which checks the recording rules along the way.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.k8s.manifests import K8S

DASHBOARD = K8S / "base" / "monitoring" / "dashboard.json"
RULES = K8S / "base" / "monitoring" / "prometheusrule.yaml"

GRAFANA_VARIABLES = {"$__rate_interval": "15m", "$__interval": "5m", "$__range": "1d", "$queue": ".*", "$node": ".*"}


@dataclass(frozen=True)
class Query:
    where: str  # "panel 'title' A", "rule PredictorLoopStale", "variable queue"
    expr: str


def rule_groups() -> list[dict[str, Any]]:
    """``spec.groups`` of the PrometheusRule: a plain Prometheus rule file's content."""
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    groups: list[dict[str, Any]] = document["spec"]["groups"]
    return groups


def write_rule_file(path: Path) -> Path:
    path.write_text(yaml.safe_dump({"groups": rule_groups()}, sort_keys=False), encoding="utf-8")
    return path


def recording_rules() -> dict[str, str]:
    return {r["record"]: r["expr"] for g in rule_groups() for r in g["rules"] if "record" in r}


def inline_recordings(expr: str, recorded: dict[str, str], depth: int = 0) -> str:
    assert depth < 10, "recording rules refer to each other in a cycle"
    for name, body in recorded.items():
        used = re.compile(rf"(?<![\w:]){re.escape(name)}(\[\w+\])?(?![\w:{{])")
        if not used.search(expr):
            continue
        inner = f"({inline_recordings(body.strip(), recorded, depth + 1)})"

        def replace(match: re.Match[str], inner: str = inner) -> str:
            window = match.group(1)
            return f"{inner}{window[:-1]}:5m]" if window else inner

        expr = used.sub(replace, expr)
    return expr


def rule_queries() -> list[Query]:
    recorded = recording_rules()
    queries = []
    for group in rule_groups():
        for rule in group["rules"]:
            name = rule.get("alert") or rule["record"]
            kind = "alert" if "alert" in rule else "record"
            queries.append(Query(f"{kind} {name}", inline_recordings(rule["expr"].strip(), recorded)))
    return queries


def _grafana(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def _panels(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for panel in items:
        out.append(panel)
        out.extend(_panels(panel.get("panels", [])))
    return out


def dashboard_queries() -> list[Query]:
    board = dashboard()
    queries = []
    for panel in _panels(board["panels"]):
        for target in panel.get("targets", []):
            queries.append(Query(f"panel {panel['title']!r} {target['refId']}", _grafana(target["expr"])))
    for variable in board["templating"]["list"]:
        if variable["type"] != "query":
            continue
        match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", variable["query"]["query"])
        assert match, f"variable {variable['name']}: only label_values(metric, label) is supported here"
        queries.append(Query(f"variable {variable['name']}", f"count by ({match.group(2)}) ({match.group(1)})"))
    return queries
