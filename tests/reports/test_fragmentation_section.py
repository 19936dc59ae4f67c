"""The report's fragmentation section: live FGD and the drain advice, in every format that shows it."""

from __future__ import annotations

import json

import pandas as pd

from models.frames import ID, TIME, VALUE
from predictor.planner.workload import JobSummary, NodeSummary, Workload
from predictor.reports import build_report, render_json, render_markdown
from predictor.reports.fragmentation import advice_lines, live_fragmentation
from predictor.reports.html import render_html
from tests.reports.fixture import fixture_inputs

NODES = (NodeSummary("n1", 8, 2), NodeSummary("n2", 8, 6), NodeSummary("n3", 8, 0))
JOBS = (
    JobSummary("q", "a", 1, 2, "running", nodes=("n1",)),
    JobSummary("q", "b", 1, 6, "running", nodes=("n2",)),
    JobSummary("q", "g", 2, 8),
)


def test_lines_state_the_measure_the_drain_and_its_cost() -> None:
    rate, lines = advice_lines(Workload(JOBS, NODES))
    # mix {2: 1/4, 6: 1/4, 8: 1/2}: n1 (6 free) strands 6 for the 8s, n2 (2 free) strands 2 for the 6s and 8s
    assert rate == (6 * 0.5 + 2 * 0.75) / 16
    assert lines == (
        "FGD: 4.5 of 16 free GPUs (28.1%) cannot be used by the typical task mix; 1 whole free 8-GPU nodes",
        "drain n1 (1 of 1 whole nodes freed for pending gang g): FGD 4.5 → 0.0 GPUs, whole free nodes 1 → 2; "
        "restarts 1 job(s), 2 GPUs",
        "move a (2 GPUs) n1 → n2",
    )


def test_the_section_appears_in_markdown_html_and_json_only_when_there_is_one() -> None:
    lines = advice_lines(Workload(JOBS, NODES))[1]
    report = build_report(**fixture_inputs(), fragmentation_advice=lines)
    markdown = render_markdown(report)
    assert "## Fragmentation\n\n- FGD: 4.5 of 16 free GPUs" in markdown
    assert "<h2>Fragmentation</h2>" in render_html(report)
    assert json.loads(render_json(report))["fragmentation_advice"] == list(lines)
    plain = build_report(**fixture_inputs())
    assert "## Fragmentation" not in render_markdown(plain)
    assert "<h2>Fragmentation</h2>" not in render_html(plain)


class Empty:
    def query_range(self, query: str, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta) -> pd.DataFrame:
        return pd.DataFrame(columns=[ID, TIME, VALUE])


def test_no_kube_state_metrics_means_no_section() -> None:
    assert live_fragmentation(Empty(), pd.Timestamp("2026-11-02T00:00Z")) is None
