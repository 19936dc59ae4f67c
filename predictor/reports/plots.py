"""The report's plots as PNG data URIs, so the HTML file stands alone (no files, fonts or scripts to fetch).

PNG rather than inline SVG: matplotlib's SVG carries a DOCTYPE and namespace URLs, and the report page
promises to hold no ``http(s)://`` reference at all (its Content-Security-Policy forbids any fetch).
The Agg backend is selected explicitly: reports are rendered in CronJobs and CI without a display.
"""

from __future__ import annotations

import base64
import io
import math
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

from models.frames import TIME, VALUE
from predictor.reports.model import Report

__all__ = ["bars_chart", "fan_chart", "heatmap_chart"]

_HISTORY_DAYS = 14


def _data_uri(fig: Any) -> str:
    buffer = io.BytesIO()
    # No metadata: the PNG stays byte-identical between runs and names no software URL.
    fig.savefig(buffer, format="png", dpi=80, metadata={"Software": None})
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def fan_chart(report: Report, queue: str, resource: str) -> str | None:
    """History of demand and usage (last two weeks) and the forecast fan for one queue."""
    charts = report.charts
    if charts is None:
        return None
    pick = (charts.demand["queue"] == queue) & (charts.demand["resource"] == resource)
    demand = charts.demand[pick].sort_values(TIME)
    used = charts.used[(charts.used["queue"] == queue) & (charts.used["resource"] == resource)].sort_values(TIME)
    fc = charts.forecast[(charts.forecast["queue"] == queue) & (charts.forecast["resource"] == resource)]
    if demand.empty and used.empty:
        return None
    newest = max(
        demand[TIME].max() if len(demand) else used[TIME].max(), used[TIME].max() if len(used) else demand[TIME].max()
    )
    since = newest - np.timedelta64(_HISTORY_DAYS, "D")
    fig, ax = plt.subplots(figsize=(8, 2.6))
    if len(demand):
        d = demand[demand[TIME] > since]
        ax.plot(d[TIME], d[VALUE], color="black", lw=0.8, label="demand (allocated + pending)")
    if len(used):
        u = used[used[TIME] > since]
        ax.plot(u[TIME], u[VALUE], color="tab:green", lw=0.8, label="used")
    fc = fc[fc[TIME] > newest].sort_values(TIME)
    if len(fc):
        ax.plot(fc[TIME], fc["mean"], color="tab:blue", lw=1.0, label="forecast p50")
        for level, alpha in ((95, 0.15), (80, 0.3)):
            if f"lo-{level}" in fc.columns and f"hi-{level}" in fc.columns:
                ax.fill_between(
                    fc[TIME],
                    fc[f"lo-{level}"],
                    fc[f"hi-{level}"],
                    color="tab:blue",
                    alpha=alpha,
                    lw=0,
                    label=f"{level} % interval",
                )
    row = next((r for r in report.queues if r.queue == queue and r.resource == resource), None)
    if row is not None:
        ax.axhline(row.deserved, color="tab:red", lw=0.8, ls="--", label="deserved now")
        ax.axhline(row.recommended_deserved, color="tab:purple", lw=0.8, ls=":", label="recommended")
    ax.set_ylabel("GPUs")
    ax.set_title(f"{queue} ({resource})", fontsize=9)
    ax.legend(fontsize=6, loc="upper left", ncol=3)
    ax.tick_params(labelsize=7)
    fig.autofmt_xdate()
    fig.tight_layout()
    return _data_uri(fig)


def heatmap_chart(report: Report) -> str | None:
    """Used / deserved per queue and day of the window."""
    charts = report.charts
    if charts is None or not charts.days or not charts.daily_utilisation:
        return None
    queues = sorted(charts.daily_utilisation)
    grid = np.array([[math.nan if v is None else v for v in charts.daily_utilisation[q]] for q in queues])
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(queues) + 1.4))
    image = ax.imshow(
        grid,
        aspect="auto",
        cmap="viridis",
        vmin=0,
        vmax=max(1.0, float(np.nanmax(grid)) if np.isfinite(grid).any() else 1.0),
    )
    ax.set_yticks(range(len(queues)), queues, fontsize=7)
    ax.set_xticks(range(len(charts.days)), [d[5:] for d in charts.days], fontsize=7)
    ax.set_title("quota utilisation (used / deserved) per day", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.03)
    fig.tight_layout()
    return _data_uri(fig)


def bars_chart(report: Report) -> str | None:
    """Current versus recommended deserved per queue, with the forecast p90 marked."""
    rows = list(report.queues)
    if not rows:
        return None
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(8, 2.8))
    ax.bar(x - 0.2, [r.deserved for r in rows], width=0.4, color="tab:gray", label="deserved now")
    ax.bar(x + 0.2, [r.recommended_deserved for r in rows], width=0.4, color="tab:purple", label="recommended")
    p90 = [math.nan if r.forecast_p90 is None else r.forecast_p90 for r in rows]
    ax.scatter(x + 0.2, p90, color="tab:blue", marker="_", s=200, label="forecast p90", zorder=3)
    ax.set_xticks(x, [r.queue for r in rows], fontsize=7, rotation=30)
    ax.set_ylabel("GPUs")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _data_uri(fig)
