"""The report model against the hand-computed fixture, and the formats against the model."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from predictor.errors import InputError
from predictor.reports import build_report, render_csv, render_json, render_markdown, write_report
from tests.reports.fixture import fixture_inputs

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "report.md"


def _rows() -> dict[str, object]:
    report = build_report(**fixture_inputs())
    return {r.queue: r for r in report.queues}


def test_queue_numbers_match_hand_computation() -> None:
    rows = _rows()
    a, b = rows["alpha"], rows["beta"]  # type: ignore[assignment]
    assert (a.allocated_mean, a.allocated_p95, a.used_mean, a.used_p95) == (10.0, 12.0, 7.0, 9.7)
    assert (a.demand_mean, a.pending_mean, a.status) == (11.0, 1.0, "starved")
    assert (a.idle_quota_gpu_h, a.idle_allocated_gpu_h, a.coverage) == (24.0, 72.0, 1.0)
    assert (a.forecast_p50, a.forecast_p90, a.confidence) == (12.0, 18.0, "medium")
    assert (a.recommended_deserved, a.change, a.expected_utilisation, a.quota_utilisation) == (14.0, 4.0, 0.857, 1.1)
    assert (b.allocated_mean, b.allocated_p95, b.status) == (8.0, 8.85, "borrowing")
    assert (b.used_mean, b.used_p95, b.coverage) == (2.333, 2.9, 0.75)
    assert (b.idle_quota_gpu_h, b.idle_allocated_gpu_h) == (0.0, 108.0)
    assert (b.forecast_p50, b.forecast_p90, b.confidence) == (3.0, 5.0, "low")
    assert (b.recommended_deserved, b.change, b.expected_utilisation, b.quota_utilisation) == (4.0, -2.0, 0.75, 1.333)


def test_summary_matches_hand_computation() -> None:
    s = build_report(**fixture_inputs()).summary
    assert (s.as_of, s.window_start) == ("2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z")
    assert (s.total_gpus, s.gpu_utilisation, s.allocation_rate) == (24.0, 0.389, 0.75)
    # after = the same demand (11 + 8) over the recommended deserved (14 + 4); it was forecast p50 / recommended
    assert (s.quota_utilisation_now, s.quota_utilisation_expected, s.fragmentation) == (1.188, 1.056, 0.125)
    assert (s.idle_quota_gpu_h, s.idle_allocated_gpu_h) == (24.0, 180.0)
    assert (s.starved, s.borrowing) == (("alpha",), ("beta",))
    assert s.top_actions[0].startswith("grow alpha deserved 10 → 14 GPUs")
    assert s.top_actions[1].startswith("shrink beta deserved 6 → 4 GPUs")


def test_daily_utilisation_and_workloads() -> None:
    report = build_report(**fixture_inputs())
    assert report.charts is not None
    assert report.charts.days == ("2026-01-01", "2026-01-02")
    assert report.charts.daily_utilisation == {"alpha": (0.733, 0.6), "beta": (0.389, None)}
    assert [(w.workload, w.savings_gpu_h) for w in report.workloads] == [("w3", 120.0), ("w1", 50.0)]


def test_csv_and_json_carry_the_same_numbers() -> None:
    report = build_report(**fixture_inputs())
    doc = json.loads(render_json(report))
    table = list(csv.DictReader(io.StringIO(render_csv(report))))
    for row, j, c in zip(report.queues, doc["queues"], table, strict=True):
        for name in ("deserved", "used_mean", "forecast_p90", "recommended_deserved", "idle_allocated_gpu_h"):
            assert j[name] == getattr(row, name) == float(c[name])
    assert doc["summary"]["quota_utilisation_expected"] == report.summary.quota_utilisation_expected


def test_markdown_matches_golden() -> None:
    text = render_markdown(build_report(**fixture_inputs()))
    if os.environ.get("UPDATE_GOLDEN") == "1":  # regenerate only on purpose
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")


def test_write_report_writes_every_format_atomically(tmp_path: Path) -> None:
    paths = write_report(build_report(**fixture_inputs()), tmp_path, html=False)
    assert sorted(p.name for p in paths.values()) == ["report-summary.csv", "report.csv", "report.json", "report.md"]
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"quotas": pd.DataFrame({"queue": ["a"], "deserved": [1.0]})}, "quota table: missing column 'guarantee'"),
        ({"total_gpus": 0.0}, "total GPUs must be a positive number"),
        ({"forecast": pd.DataFrame({"series_id": ["a"]})}, "forecast frame: missing column 'timestamp'"),
    ],
)
def test_bad_input_is_one_line_input_error(change: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        build_report(**{**fixture_inputs(), **change})
    assert "\n" not in str(info.value)


def test_html_escapes_cluster_strings() -> None:
    from predictor.reports.html import render_html

    inputs = fixture_inputs()
    inputs["recommendations"] = inputs["recommendations"].assign(reason=["<script>alert(1)</script>", "a & b"])
    html = render_html(build_report(**inputs), plots=False)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "a &amp; b" in html


def test_unset_capability_is_null_not_infinity() -> None:
    inputs = fixture_inputs()
    inputs["quotas"] = inputs["quotas"].assign(capability=[float("inf"), 20.0])
    report = build_report(**inputs)
    doc = json.loads(render_json(report))
    assert [q["capability"] for q in doc["queues"]] == [20.0, None]
    assert "| beta | nvidia.com/gpu | 0.0 | 6.0 | n/a |" in render_markdown(report)


def test_every_format_shows_the_same_queue_cells() -> None:
    import html as html_lib
    import re

    from predictor.reports.columns import QUEUE_COLUMNS, fmt
    from predictor.reports.html import render_html

    report = build_report(**fixture_inputs())
    doc = json.loads(render_json(report))
    table = list(csv.DictReader(io.StringIO(render_csv(report))))
    expected = [[fmt(q[f], k) for f, _, k in QUEUE_COLUMNS] for q in doc["queues"]]
    from_csv = [
        [fmt(None if row[f] == "" else (row[f] if k == "text" else float(row[f])), k) for f, _, k in QUEUE_COLUMNS]
        for row in table
    ]
    md_rows = [line for line in render_markdown(report).splitlines() if line.startswith(("| alpha", "| beta"))]
    from_md = [[c.strip() for c in line.strip("|").split("|")] for line in md_rows]
    page = render_html(report, plots=False)
    body = page[page.index("<tbody>") : page.index("</tbody>")]
    from_html = [
        [html_lib.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
        for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body)
    ]
    assert expected == from_csv == from_md == from_html


def test_energy_per_queue_from_the_rightsize_table() -> None:
    """The energy section sums right-sizing's per-workload energy per queue (kWh drawn, kWh/week saved at
    the advised caps, workloads capped) in every format; without power series it says so; a table
    without energy columns (the golden fixture's) shows no section."""
    from predictor.reports.html import render_html
    from predictor.reports.inputs import rightsize_savings

    inputs = fixture_inputs()
    inputs["rightsize"] = inputs["rightsize"].assign(
        energy_kwh=[120.0, 30.5, 40.0], energy_saving_kwh_week=[5.0, float("nan"), 1.25]
    )
    report = build_report(**inputs)
    assert [(e.queue, e.energy_kwh, e.energy_saving_kwh_week, e.capped_workloads) for e in report.energy] == [
        ("alpha", 160.0, 6.25, 2),
        ("beta", 30.5, None, 0),
    ]
    markdown = render_markdown(report)
    assert "## Energy per queue" in markdown
    assert "| alpha | 160.0 | 6.2 | 2 |" in markdown and "| beta | 30.5 | n/a | 0 |" in markdown
    assert json.loads(render_json(report))["energy"][0] == {
        "queue": "alpha",
        "energy_kwh": 160.0,
        "energy_saving_kwh_week": 6.25,
        "capped_workloads": 2,
    }
    page = render_html(report, plots=False)
    assert "Energy per queue" in page and '<td class="num">160.0</td>' in page
    no_power = build_report(**{**inputs, "rightsize": inputs["rightsize"].assign(energy_kwh=float("nan"))})
    assert "No GPU power series" in render_markdown(no_power)
    assert "Energy per queue" not in render_markdown(build_report(**fixture_inputs()))
    # rightsize_savings carries the runs' energy and the advised saving through to that table
    table = pd.DataFrame(
        {
            "namespace": ["n", "n"],
            "workload": ["a", "b"],
            "queue": ["q1", "q2"],
            "gpu_request": [2.0, 1.0],
            "recommended_gpus": [1.0, 1.0],
            "energy_saving_kwh_week": [0.5, float("nan")],
        }
    )
    runs = pd.DataFrame(
        {
            "namespace": "n",
            "workload": ["a", "a", "b"],
            "runtime_h": [1.0, 2.0, 1.0],
            "energy_kwh": [1.5, 2.5, float("nan")],
        }
    )
    savings = rightsize_savings(table, runs)
    assert savings["energy_kwh"].tolist()[0] == 4.0 and pd.isna(savings["energy_kwh"].tolist()[1])
    assert [
        (e.queue, e.energy_kwh, e.energy_saving_kwh_week)
        for e in build_report(**{**inputs, "rightsize": savings}).energy
    ] == [("q1", 4.0, 0.5), ("q2", None, None)]
