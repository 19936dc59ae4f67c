"""The what-if's measures and the one sentence that heads a report: today's quotas against the recommendations.

A reader decides on the recommendations by what they change for the teams (GPUs allocated, how long jobs
wait, how much demand starves, how much work reclaims throw away), so the report opens with those numbers from
the replay, not with quota utilisation, which a larger quota lowers on purpose. A module of its own so that the
renderers need neither the replay nor the simulator.
"""

from __future__ import annotations

from predictor.reports.columns import fmt
from predictor.reports.model import WhatIfRow

__all__ = ["HEADLINE", "MEASURES", "MEASURE_LABELS", "whatif_headline"]

# (summary key, label, unit, direction: +1 higher is better, -1 lower is better, 0 neither)
MEASURES = (
    ("quota_utilisation", "quota utilisation (allocated / deserved)", "pct", 1),
    ("allocation", "allocation (allocated / GPUs)", "pct", 1),
    ("utilisation", "GPU utilisation (used / GPUs)", "pct", 1),
    ("pending_gpu_h", "starvation: pending GPU-hours", "num", -1),
    ("wait_p50_min", "wait p50, min", "num", -1),
    ("wait_p95_min", "wait p95, min", "num", -1),
    ("reclaims", "reclaims", "num", -1),
    ("preemptions", "preemptions", "num", -1),
    ("lost_gpu_h", "lost GPU-hours (since checkpoint + restart)", "num", -1),
    ("goodput_gpu_h", "goodput GPU-hours", "num", 1),
    ("fragmentation", "fragmentation (FGD stranded / GPUs)", "pct", -1),
)
MEASURE_LABELS = {key: label for key, label, _, _ in MEASURES}
# The headline's measures, in the order a team cares about them, with the words the sentence uses.
HEADLINE = (
    ("pending_gpu_h", "starved GPU-h"),
    ("wait_p95_min", "p95 wait, min"),
    ("lost_gpu_h", "lost GPU-h"),
    ("allocation", "allocation"),
)


def whatif_headline(rows: tuple[WhatIfRow, ...], note: str = "") -> str:
    """One sentence: each headline measure today → recommended, from the replay's rows; or why there is none."""
    by = {r.measure: r for r in rows}
    parts = []
    for key, words in HEADLINE:
        row = by.get(MEASURE_LABELS[key])
        if row is not None:
            parts.append(f"{words} {fmt(row.as_run, row.unit)} → {fmt(row.recommended, row.unit)} ({row.verdict})")
    if not parts:
        return note or "what-if: not replayed"
    return "The window's jobs replayed under today's quotas → under the recommended ones: " + "; ".join(parts) + "."
