"""The HTML report: one self-contained file (inline CSS, plots as data URIs, no scripts).

A Content-Security-Policy meta tag (``default-src 'none'; img-src data:; style-src 'unsafe-inline'``)
makes the browser refuse any fetch the page might attempt, and the template autoescapes every string
that comes from the cluster (queue names, reasons), so a hostile label cannot inject markup.
"""

from __future__ import annotations

from jinja2 import Environment, PackageLoader, select_autoescape

from predictor.reports.columns import QUEUE_COLUMNS, fmt, kwh
from predictor.reports.energy import has_energy
from predictor.reports.headline import whatif_headline
from predictor.reports.model import Report

__all__ = ["CSP", "render_html"]

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("predictor.reports", "templates"),
        autoescape=select_autoescape(["html", "j2"], default_for_string=True, default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = fmt
    env.filters["kwh"] = kwh
    return env


def render_html(report: Report, *, plots: bool = True) -> str:
    """The report as one HTML page; ``plots=False`` leaves the charts out (fast tests)."""
    charts: dict[str, str | None] = {"heatmap": None, "bars": None}
    fans: list[tuple[str, str]] = []
    if plots:
        from predictor.reports.plots import bars_chart, fan_chart, heatmap_chart

        charts = {"heatmap": heatmap_chart(report), "bars": bars_chart(report)}
        for row in report.queues:
            uri = fan_chart(report, row.queue, row.resource)
            if uri is not None:
                fans.append((f"{row.queue} ({row.resource})", uri))
    template = _environment().get_template("report.html.j2")
    return template.render(
        report=report,
        s=report.summary,
        columns=QUEUE_COLUMNS,
        charts=charts,
        fans=fans,
        csp=CSP,
        has_energy=has_energy(report.energy),
        whatif_headline=whatif_headline(report.whatif, report.whatif_note),
    )
