"""Markdown, CSV and JSON renderings of one ``Report``, plus ``write_report`` that writes all four formats.

Every format reads the same rounded fields of the model, and Markdown and HTML share one column list and
number formatter (``columns``), so a number cannot differ between the HTML a manager opens and the CSV a
script reads. Files are written atomically: a report directory never holds a half-written file.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, fields
from pathlib import Path

from predictor import atomicio
from predictor.reports.columns import QUEUE_COLUMNS, fmt, kwh
from predictor.reports.energy import has_energy
from predictor.reports.headline import whatif_headline
from predictor.reports.model import QueueRow, Report


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report) -> str:
    """The Markdown report (what the golden file pins)."""
    s = report.summary
    out = [
        f"# {report.title}",
        "",
        f"Data up to {s.as_of}; window {s.window_days} days from {s.window_start}.",
        "",
        *_whatif_markdown(report),
        "## Cluster summary",
        "",
        "| measure | value |",
        "|---|---|",
    ]
    summary_rows = (
        ("GPUs", fmt(s.total_gpus)),
        ("GPU utilisation (used / GPUs)", fmt(s.gpu_utilisation, "pct")),
        ("allocation rate (allocated / GPUs)", fmt(s.allocation_rate, "pct")),
        ("quota utilisation now (demand / deserved)", fmt(s.quota_utilisation_now, "pct")),
        ("quota utilisation after (demand / recommended)", fmt(s.quota_utilisation_expected, "pct")),
        ("fragmentation (FGD, share of free GPUs)", fmt(s.fragmentation, "pct")),
        ("idle quota (deserved − allocated), GPU-h", fmt(s.idle_quota_gpu_h)),
        ("idle allocated (allocated − used), GPU-h", fmt(s.idle_allocated_gpu_h)),
        ("starved queues", ", ".join(s.starved) or "none"),
        ("borrowing queues", ", ".join(s.borrowing) or "none"),
    )
    out += [f"| {_cell(k)} | {_cell(v)} |" for k, v in summary_rows]
    out += ["", "## Top actions", ""]
    out += [f"{i}. {_cell(a)}" for i, a in enumerate(s.top_actions, 1)] or ["No quota change recommended."]
    out += [
        "",
        "## Queues",
        "",
        "| " + " | ".join(h for _, h, _ in QUEUE_COLUMNS) + " |",
        "|" + "|".join("---" if k == "text" else "---:" for _, _, k in QUEUE_COLUMNS) + "|",
    ]
    for row in report.queues:
        out.append("| " + " | ".join(_cell(fmt(getattr(row, f), k)) for f, _, k in QUEUE_COLUMNS) + " |")
    out += ["", "### Reasons", ""]
    out += [f"- **{_cell(r.queue)}** ({_cell(r.resource)}): {_cell(r.reason)}" for r in report.queues]
    out += ["", "## Right-sizing: largest savings", ""]
    if report.workloads:
        out += ["| workload | queue | requested GPUs | recommended GPUs | savings GPU-h |", "|---|---|---:|---:|---:|"]
        out += [
            f"| {_cell(w.workload)} | {_cell(w.queue)} | {fmt(w.requested_gpus)} | {fmt(w.recommended_gpus)} "
            f"| {fmt(w.savings_gpu_h)} |"
            for w in report.workloads
        ]
    else:
        out.append("No right-sizing table was available for this report.")
    if report.fragmentation_advice:
        out += ["", "## Fragmentation", ""]
        out += [f"- {_cell(line)}" for line in report.fragmentation_advice]
    if report.energy:  # only with a right-sizing table that carries energy columns
        out += ["", "## Energy per queue", ""]
        if has_energy(report.energy):
            out += [
                "| queue | GPU energy kWh | saving at advised caps kWh/week | workloads capped |",
                "|---|---:|---:|---:|",
            ]
            out += [
                f"| {_cell(e.queue)} | {kwh(e.energy_kwh)} | {kwh(e.energy_saving_kwh_week)} | {e.capped_workloads} |"
                for e in report.energy
            ]
        else:
            out.append("No GPU power series (DCGM_FI_DEV_POWER_USAGE) in the right-sizing data: no energy numbers.")
    out += ["", "## Data", ""]
    out += [f"- {_cell(k)}: {_cell(v)}" for k, v in sorted(report.sources.items())]
    out += [f"- note: {_cell(n)}" for n in report.notes]
    return "\n".join(out) + "\n"


def _whatif_markdown(report: Report) -> list[str]:
    """The headline: today's quotas against the recommendations, replayed; or the one line saying why not."""
    if not report.whatif:
        return [_cell(report.whatif_note), ""] if report.whatif_note else []
    out = [
        "## What-if: today's quotas against the recommendations",
        "",
        _cell(whatif_headline(report.whatif)),
        "",
        "| measure | today's quotas | recommended | |",
        "|---|---:|---:|---|",
    ]
    out += [
        f"| {_cell(w.measure)} | {fmt(w.as_run, w.unit)} | {fmt(w.recommended, w.unit)} | {w.verdict} |"
        for w in report.whatif
    ]
    return [*out, ""]


def render_csv(report: Report) -> str:
    """One row per queue and GPU type, every field of ``QueueRow`` (numbers as stored, unformatted)."""
    names = [f.name for f in fields(QueueRow)]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for row in report.queues:
        writer.writerow({k: ("" if v is None else v) for k, v in asdict(row).items()})
    return buffer.getvalue()


def render_summary_csv(report: Report) -> str:
    """The cluster summary as ``measure,value`` rows (lists joined with ``;``)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["measure", "value"])
    for key, value in asdict(report.summary).items():
        if isinstance(value, tuple | list):
            value = ";".join(map(str, value))
        writer.writerow([key, "" if value is None else value])
    return buffer.getvalue()


def render_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def write_text(path: Path, text: str) -> Path:
    """Write one report file through the project's atomic writer, readable by everyone (``0o644``)."""
    return atomicio.write_text(path, text, permissions=0o644)  # a report is meant to be shared


def write_report(report: Report, out: Path, *, html: bool = True) -> dict[str, Path]:
    """``report.{md,csv,json,html}`` and ``report-summary.csv`` under ``out``; returns the paths by format."""
    paths = {
        "markdown": write_text(out / "report.md", render_markdown(report)),
        "csv": write_text(out / "report.csv", render_csv(report)),
        "summary_csv": write_text(out / "report-summary.csv", render_summary_csv(report)),
        "json": write_text(out / "report.json", render_json(report)),
    }
    if html:
        from predictor.reports.html import render_html  # matplotlib is imported only when HTML is wanted

        paths["html"] = write_text(out / "report.html", render_html(report))
    return paths
