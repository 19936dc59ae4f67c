"""The report model: every number a quota report shows, computed once from frames, rendered four ways.

The model is built from plain tables (current quotas, allocation/usage/demand history, a forecast frame,
recommendations, an optional right-sizing table), never from live services, so a hand-computed fixture
can pin every number and HTML, Markdown, CSV and JSON cannot disagree: they all read this dataclass.

Definitions (``W`` = the last ``window_days`` of history ending at ``as_of``, the newest sample):
- allocated/used/demand mean and p95: over the samples in ``W`` (p95 linear, as numpy);
- forecast p50 = mean of the forecast ``mean`` column over the next ``window_days``; p90 = the largest
  ``hi-80`` there (the upper end of the 80 % interval is the 90th percentile);
- idle quota = Σ max(deserved − allocated, 0) × step (GPU-hours the queue was entitled to and left
  unallocated); idle allocated = Σ max(allocated − used, 0) × step (held by pods but not busy);
- status: ``borrowing`` when mean allocated > deserved, else ``starved`` when mean pending
  (demand − allocated) ≥ 0.5 GPU, else ``ok``;
- coverage = samples present in ``W`` / samples expected at the series' step (the smallest over the
  allocated and used series); confidence is ``high`` (coverage ≥ 0.95 and relative 80 % band width
  ≤ 0.5), ``medium`` (≥ 0.8 and ≤ 1.0) or ``low``;
- quota utilisation now = Σ mean demand / Σ deserved; after = the same Σ mean demand / Σ recommended deserved:
  the window's demand (allocated + pending) under today's and under the recommended quotas, so the two
  differ only by the quotas. (Dividing the forecast p50 by the recommendation instead made "after" drop
  whenever the forecast sat below last week's mean, even for quotas the plan left unchanged.) Per queue,
  expected utilisation = forecast p50 / recommended deserved; busy GPUs appear as GPU utilisation
  (used / GPUs) in the summary, and the what-if section replays the window's jobs under both quota sets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from models.frames import TIME, VALUE
from predictor.errors import InputError
from predictor.reports.energy import EnergyRow, energy_rows
from predictor.reports.tables import DEFAULT_RESOURCE as DEFAULT_RESOURCE  # re-exported: still imported from here
from predictor.reports.tables import InputTables, need, validated_tables
from predictor.reports.window import (
    forecast_window,
    idle_gpu_hours,
    mean_and_p95,
    newest_sample,
    sample_coverage,
    window_slice,
)

_ROUND = 3  # every stored number is rounded once here, so all renderers print the same digits


def _r(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(float(value), _ROUND) + 0.0  # + 0.0 turns -0.0 into 0.0


@dataclass(frozen=True)
class QueueRow:
    """One queue and GPU resource: today's quota, what happened in the window, what to set next."""

    queue: str
    resource: str
    guarantee: float
    deserved: float
    capability: float | None  # None: unset (no hard cap)
    allocated_mean: float | None
    allocated_p95: float | None
    used_mean: float | None
    used_p95: float | None
    demand_mean: float | None
    pending_mean: float | None
    forecast_p50: float | None
    forecast_p90: float | None
    recommended_guarantee: float
    recommended_deserved: float
    recommended_capability: float | None
    change: float
    reason: str
    confidence: str
    quota_utilisation: float | None
    expected_utilisation: float | None
    idle_quota_gpu_h: float | None
    idle_allocated_gpu_h: float | None
    status: str
    coverage: float


@dataclass(frozen=True)
class WorkloadRow:
    """A workload whose GPU request is larger than what it uses (from the right-sizing table)."""

    workload: str
    queue: str
    requested_gpus: float
    recommended_gpus: float
    savings_gpu_h: float


@dataclass(frozen=True)
class WhatIfRow:
    """One measure of the what-if: the window's jobs replayed under today's and the recommended quotas."""

    measure: str
    unit: str  # pct or num
    as_run: float
    recommended: float
    verdict: str  # better, worse or same


@dataclass(frozen=True)
class Summary:
    """The cluster on one screen."""

    as_of: str
    window_start: str
    window_days: int
    total_gpus: float
    gpu_utilisation: float | None
    allocation_rate: float | None
    quota_utilisation_now: float | None
    quota_utilisation_expected: float | None
    fragmentation: float | None
    idle_quota_gpu_h: float
    idle_allocated_gpu_h: float
    starved: tuple[str, ...]
    borrowing: tuple[str, ...]
    top_actions: tuple[str, ...]


@dataclass
class ChartData:
    """Hourly frames behind the plots (HTML only; not part of the numbers the formats share)."""

    demand: pd.DataFrame
    used: pd.DataFrame
    forecast: pd.DataFrame
    days: tuple[str, ...] = ()
    daily_utilisation: Mapping[str, tuple[float | None, ...]] = field(default_factory=dict)


@dataclass
class Report:
    """Everything a report shows. ``to_dict`` is the JSON document; the other formats read the same fields."""

    title: str
    summary: Summary
    queues: tuple[QueueRow, ...]
    workloads: tuple[WorkloadRow, ...]
    sources: Mapping[str, str]
    notes: tuple[str, ...]
    charts: ChartData | None = None
    fragmentation_advice: tuple[str, ...] = ()  # live FGD and what to drain; empty: section left out
    energy: tuple[EnergyRow, ...] = ()  # per queue, when the right-sizing table carries energy columns
    whatif: tuple[WhatIfRow, ...] = ()
    whatif_note: str = ""  # why there is no what-if replay ("what-if: …"), when there is none

    def to_dict(self) -> dict[str, Any]:
        daily = {}
        if self.charts is not None:
            daily = {
                "days": list(self.charts.days),
                "queues": {q: list(v) for q, v in self.charts.daily_utilisation.items()},
            }
        whatif: dict[str, Any] = {"whatif": [asdict(w) for w in self.whatif]} if self.whatif else {}
        if self.whatif_note:
            whatif["whatif_note"] = self.whatif_note
        return {
            "title": self.title,
            "summary": {
                **asdict(self.summary),
                "starved": list(self.summary.starved),
                "borrowing": list(self.summary.borrowing),
                "top_actions": list(self.summary.top_actions),
            },
            "queues": [asdict(q) for q in self.queues],
            "workloads": [asdict(w) for w in self.workloads],
            "energy": [asdict(e) for e in self.energy],
            "daily_utilisation": daily,
            "sources": dict(self.sources),
            "notes": list(self.notes),
            "fragmentation_advice": list(self.fragmentation_advice),
            **whatif,
        }


# -- helpers -------------------------------------------------------------------------------------------


def _confidence(coverage: float, forecast: pd.DataFrame, p50: float | None) -> str:
    if forecast.empty or p50 is None or not {"lo-80", "hi-80"} <= set(forecast.columns):
        return "low"
    width = float((forecast["hi-80"] - forecast["lo-80"]).mean()) / max(p50, 1.0)
    if coverage >= 0.95 and width <= 0.5:
        return "high"
    if coverage >= 0.8 and width <= 1.0:
        return "medium"
    return "low"


def _action(row: QueueRow) -> str:
    verb = "grow" if row.change > 0 else "shrink"
    return (
        f"{verb} {row.queue} deserved {row.deserved:g} → {row.recommended_deserved:g} GPUs "
        f"({row.reason}; confidence {row.confidence})"
    )


# -- the builder -----------------------------------------------------------------------------------------


def build_report(
    *,
    quotas: pd.DataFrame,
    allocated: pd.DataFrame,
    used: pd.DataFrame,
    demand: pd.DataFrame,
    forecast: pd.DataFrame,
    recommendations: pd.DataFrame,
    total_gpus: float,
    rightsize: pd.DataFrame | None = None,
    fragmentation: float | None = None,
    window_days: int = 7,
    title: str = "GPU quota recommendations",
    sources: Mapping[str, str] | None = None,
    notes: tuple[str, ...] = (),
    top_workloads: int = 10,
    fragmentation_advice: tuple[str, ...] = (),
) -> Report:
    """The report model from its input tables (see the module docstring for every definition).

    ``quotas``: ``queue, [resource,] guarantee, deserved, capability``. ``allocated``/``used``/``demand``:
    history frames with ``series_id`` = queue, in GPUs. ``forecast``: a forecast frame with ``series_id`` =
    queue. ``recommendations``: ``queue, [resource,] guarantee, deserved, capability, reason``.
    ``rightsize``: ``workload, queue, requested_gpus, recommended_gpus, savings_gpu_h`` and, for the energy
    section, ``energy_kwh, energy_saving_kwh_week`` (``predictor.reports.energy``).
    """
    if window_days < 1:
        raise InputError(f"window_days must be >= 1, got {window_days}")
    if not math.isfinite(total_gpus) or total_gpus <= 0:
        raise InputError(f"total GPUs must be a positive number, got {total_gpus}")
    tables = validated_tables(quotas, allocated, used, demand, forecast, recommendations)
    as_of = newest_sample(tables.allocated, tables.used)
    window = pd.Timedelta(days=window_days)
    start = as_of - window
    rows = [
        _queue_row(record, tables, as_of, window)
        for record in tables.quotas.sort_values(["queue", "resource"]).to_dict("records")
    ]
    summary = _summary(rows, as_of, start, window_days, total_gpus, fragmentation)
    days, daily = _daily(tables.used, tables.quotas, start, as_of)
    charts = ChartData(
        demand=tables.demand, used=tables.used, forecast=tables.forecast, days=days, daily_utilisation=daily
    )
    return Report(
        title=title,
        summary=summary,
        queues=tuple(rows),
        workloads=_workloads(rightsize, top_workloads),
        sources=dict(sources or {}),
        notes=tuple(notes),
        charts=charts,
        fragmentation_advice=tuple(fragmentation_advice),
        energy=energy_rows(rightsize),
    )


def _queue_row(record: Mapping[Any, Any], tables: InputTables, as_of: pd.Timestamp, window: pd.Timedelta) -> QueueRow:
    """One queue and resource: its window statistics, forecast, recommendation and status."""
    key = (str(record["queue"]), str(record["resource"]))
    deserved, capability, guarantee = (float(record[c]) for c in ("deserved", "capability", "guarantee"))
    a, u, d = (window_slice(f, key, as_of - window, as_of) for f in (tables.allocated, tables.used, tables.demand))
    a_mean, a_p95 = mean_and_p95(a[VALUE].to_numpy())
    u_mean, u_p95 = mean_and_p95(u[VALUE].to_numpy())
    d_mean, _ = mean_and_p95(d[VALUE].to_numpy())
    coverage = sample_coverage(a, u, tables.allocated, window)
    idle_quota, idle_alloc = idle_gpu_hours(a, u, deserved)
    f, p50, p90 = forecast_window(tables.forecast, key, as_of, window)
    r_g, r_d, r_c, reason = _recommended(tables.recommendations, key, guarantee, deserved, capability)
    status, pending = _status(a_mean, d_mean, deserved)
    return QueueRow(
        queue=key[0],
        resource=key[1],
        guarantee=guarantee,
        deserved=deserved,
        capability=_r(capability),
        allocated_mean=_r(a_mean),
        allocated_p95=_r(a_p95),
        used_mean=_r(u_mean),
        used_p95=_r(u_p95),
        demand_mean=_r(d_mean),
        pending_mean=_r(pending),
        forecast_p50=_r(p50),
        forecast_p90=_r(p90),
        recommended_guarantee=r_g,
        recommended_deserved=r_d,
        recommended_capability=_r(r_c),
        change=_r(r_d - deserved) or 0.0,
        reason=reason,
        confidence=_confidence(coverage, f, p50),
        quota_utilisation=_r(d_mean / deserved) if d_mean is not None and deserved > 0 else None,
        expected_utilisation=_r(p50 / r_d) if p50 is not None and r_d > 0 else None,
        idle_quota_gpu_h=_r(idle_quota),
        idle_allocated_gpu_h=_r(idle_alloc),
        status=status,
        coverage=_r(coverage) or 0.0,
    )


def _recommended(
    rec: Mapping[tuple[str, str], Mapping[Any, Any]],
    key: tuple[str, str],
    guarantee: float,
    deserved: float,
    capability: float,
) -> tuple[float, float, float, str]:
    """Recommended guarantee, deserved, capability and reason; today's values when there is none."""
    if key not in rec:
        return guarantee, deserved, capability, "no recommendation: kept as is"
    r = rec[key]
    r_d, r_c, r_g = float(r["deserved"]), float(r["capability"]), float(r["guarantee"])
    return r_g, r_d, r_c, str(r["reason"])


def _status(a_mean: float | None, d_mean: float | None, deserved: float) -> tuple[str, float | None]:
    """``borrowing``, ``starved`` or ``ok``, and the mean pending demand (demand − allocated) behind it."""
    pending = d_mean - a_mean if d_mean is not None and a_mean is not None else None
    if a_mean is not None and a_mean > deserved + 1e-9:
        return "borrowing", pending
    if pending is not None and pending >= 0.5:
        return "starved", pending
    return "ok", pending


def _summary(
    rows: list[QueueRow],
    as_of: pd.Timestamp,
    start: pd.Timestamp,
    window_days: int,
    total_gpus: float,
    fragmentation: float | None,
) -> Summary:
    used = sum(r.used_mean or 0.0 for r in rows)
    demand = sum(r.demand_mean or 0.0 for r in rows)
    allocated = sum(r.allocated_mean or 0.0 for r in rows)
    deserved = sum(r.deserved for r in rows)
    recommended_all = sum(r.recommended_deserved for r in rows)
    movers = sorted((r for r in rows if abs(r.change) > 1e-9), key=lambda r: (-abs(r.change), r.queue))
    return Summary(
        as_of=as_of.isoformat().replace("+00:00", "Z"),
        window_start=start.isoformat().replace("+00:00", "Z"),
        window_days=window_days,
        total_gpus=float(total_gpus),
        gpu_utilisation=_r(used / total_gpus),
        allocation_rate=_r(allocated / total_gpus),
        quota_utilisation_now=_r(demand / deserved) if deserved > 0 else None,
        quota_utilisation_expected=_r(demand / recommended_all) if recommended_all > 0 else None,
        fragmentation=_r(fragmentation) if fragmentation is not None else None,
        idle_quota_gpu_h=_r(sum(r.idle_quota_gpu_h or 0.0 for r in rows)) or 0.0,
        idle_allocated_gpu_h=_r(sum(r.idle_allocated_gpu_h or 0.0 for r in rows)) or 0.0,
        starved=tuple(r.queue for r in rows if r.status == "starved"),
        borrowing=tuple(r.queue for r in rows if r.status == "borrowing"),
        top_actions=tuple(_action(r) for r in movers[:3]),
    )


def _daily(
    used: pd.DataFrame, quotas: pd.DataFrame, start: pd.Timestamp, as_of: pd.Timestamp
) -> tuple[tuple[str, ...], dict[str, tuple[float | None, ...]]]:
    """Mean used / deserved per queue and UTC day of the window (the heatmap's numbers)."""
    window = used[(used[TIME] > start) & (used[TIME] <= as_of)]
    if window.empty:
        return (), {}
    day = window[TIME].dt.strftime("%Y-%m-%d")
    days = tuple(sorted(day.unique()))
    means = window.groupby(["queue", day])[VALUE].mean()
    deserved = quotas.groupby("queue")["deserved"].sum()
    out: dict[str, tuple[float | None, ...]] = {}
    for queue in sorted(deserved.index.astype(str)):
        d = float(deserved[queue])
        out[queue] = tuple(
            _r(float(means[(queue, x)]) / d) if (queue, x) in means.index and d > 0 else None for x in days
        )
    return days, out


def _workloads(rightsize: pd.DataFrame | None, top: int) -> tuple[WorkloadRow, ...]:
    if rightsize is None or rightsize.empty:
        return ()
    columns = ("workload", "queue", "requested_gpus", "recommended_gpus", "savings_gpu_h")
    need(rightsize, columns, "right-sizing table")
    best = rightsize.sort_values(["savings_gpu_h", "workload"], ascending=[False, True]).head(top)
    return tuple(
        WorkloadRow(
            str(w["workload"]),
            str(w["queue"]),
            _r(float(w["requested_gpus"])) or 0.0,
            _r(float(w["recommended_gpus"])) or 0.0,
            _r(float(w["savings_gpu_h"])) or 0.0,
        )
        for w in best.to_dict("records")
        if float(w["savings_gpu_h"]) > 0
    )
