"""What one cycle exports on ``/metrics``: holds by reason, fragmentation, forecast bands, planned quotas,
served models, and the cycle's result (kept apart from the cycle so the cycle reads as its steps)."""

from __future__ import annotations

from collections import Counter as CodeCounts

import pandas as pd

from models.frames import ID
from predictor.diagnose.bands import export_forecast_bands, step_at
from predictor.loop.metrics import LoopMetrics
from predictor.planner import QueuePlan
from predictor.planner.decisions import TARGET_CODES
from predictor.planner.fragmentation import fgd, task_mix
from predictor.planner.workload import Workload

__all__ = ["observe_cycle"]


def observe_cycle(
    m: LoopMetrics,
    resource: str,
    now: pd.Timestamp,
    plan: QueuePlan,
    forecast: pd.DataFrame | None,
    versions: dict[str, str],
    hold: tuple[str, str] | None,
    workload: Workload | None = None,
) -> None:
    """Export one planned cycle's metrics on ``m`` (quotas of the planner's ``resource``)."""
    # Clipped or raised changes are counted by the rule that moved it (safety codes, and the workload rules
    # gang_floor / whole_nodes / pool / steady_priority). One increment per code, codes in first-seen order.
    held = CodeCounts(h.code for h in plan.held)
    held.update(c.code for c in plan.changes if c.code not in TARGET_CODES)
    for code, count in held.items():
        m.held.labels(reason=code).inc(count)
    m.fragmentation.clear()
    if workload is not None and workload.nodes:
        frag = fgd(workload.nodes, task_mix(workload))
        measures = {
            "fgd_gpus": frag.gpus,
            "rate": frag.rate,
            "free_gpus": float(frag.free),
            "free_nodes": float(frag.free_nodes),
        }
        for measure, amount in measures.items():
            m.fragmentation.labels(measure=measure).set(amount)
    if forecast is not None and not forecast.empty:
        # Both band families show the step that covers now (for a fresh forecast: its first step).
        current = step_at(forecast, now)
        for column in [c for c in ("mean", "lo-80", "hi-80", "lo-95", "hi-95") if c in current.columns]:
            for queue, value in zip(current[ID], current[column], strict=True):
                m.child(m.band, str(queue), column).set(float(value))
        if {"lo-80", "hi-80"} <= set(forecast.columns):
            # predictor_forecast_upper/lower{series,level}: the dynamic thresholds alert rules compare
            # live demand against (examples/alerts/forecast-bands.yaml, k8s PrometheusRule).
            export_forecast_bands(m.registry, forecast, level=80, at=now, current=current)
    for name, state in plan.desired.items():
        for f in ("deserved", "capability", "guarantee"):
            value = state.get(f).get(resource)
            if value is not None:
                m.child(m.quota, name, f).set(value)
    if versions:
        m.models(versions)
    m.cycles.labels(result="held" if hold else "ok").inc()
    if hold is None:
        m.succeeded(now.timestamp())
