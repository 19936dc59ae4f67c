"""How the demand prediction and the forecast combine into one queue target, and which one set it.

The forecast sees a queue's demand as a time series; the demand model sees the jobs the queue holds now
(running + pending) and its last week. Either can be the larger: a burst of submitted jobs is in the
demand model before any forecast can have seen it, and a daily peak the forecast expects may not be
queued yet. The rule (docs/design.md, "Demand and forecast"):

    deserved target   = max(forecast deserved quantile, demand peak) × (1 + headroom)
    capability target = max(forecast capability quantile, demand peak) × (1 + headroom)
    guarantee target  = forecast guarantee quantile (demand never raises a floor other queues pay for)

each then bounded exactly as before (the queue's ``max_deserved``/``max_capability``, ``MAX_GPUS`` on
every input, rounding, and the whole safety policy after it). The field's ``code`` is ``demand`` when the
demand peak is strictly above the forecast quantile, else ``forecast``. A queue without a demand row is
sized by the forecast alone and its reason says why demand is unknown — never as zero demand.

Pure: the demand frame is data; reading it (file, registry) is the caller's business.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from models.frames import ID
from predictor.errors import InputError
from predictor.planner.quantity import MAX_GPUS
from predictor.planner.settings import PlannerSettings

__all__ = ["DEMAND_COLUMNS", "UNKNOWN_NO_ROW", "Combined", "Demand", "combine", "demand_peaks"]

Key = tuple[str, str]  # (queue, resource)

# The columns ``predictor demand`` writes and ``predictor plan --demand`` reads (only queue and peak are needed).
DEMAND_COLUMNS = ("queue", "resource", "peak", "now", "quantile", "horizon_h", "model", "timestamp")
UNKNOWN_NO_ROW = "no row for this queue in the demand input"


@dataclass(frozen=True)
class Demand:
    """One queue's demand peak in GPUs, and the words that cite it (quantile, horizon, model)."""

    peak: float
    label: str


@dataclass(frozen=True)
class Combined:
    """Unrounded wants for deserved and capability, the code of each, and the basis in words."""

    deserved: float
    capability: float
    codes: Mapping[str, str]
    basis: str


def _label(row: Mapping[Any, object]) -> str:
    parts = ["demand"]
    quantile = pd.to_numeric(pd.Series([row.get("quantile")]), errors="coerce").iloc[0]
    if pd.notna(quantile):
        parts.append(f"q{float(quantile):g}")
    horizon = pd.to_numeric(pd.Series([row.get("horizon_h")]), errors="coerce").iloc[0]
    if pd.notna(horizon):
        parts.append(f"{float(horizon):g} h peak")
    else:
        parts.append("peak")
    model = row.get("model")
    label = " ".join(parts)
    return label + (f" ({model})" if isinstance(model, str) and model.strip() else "")


def demand_peaks(demand: pd.DataFrame | None, settings: PlannerSettings) -> dict[Key, Demand]:
    """``(queue, resource) → Demand`` from a demand frame (``queue``/``series_id``, ``peak``/``value``, …)."""
    if demand is None or demand.empty:
        return {}
    queue_col = "queue" if "queue" in demand.columns else ID
    value_col = next((c for c in ("peak", "value", "mean") if c in demand.columns), None)
    if queue_col not in demand.columns or value_col is None:
        raise InputError("demand frame needs a queue (or series_id) column and a peak (or value) column")
    peaks = pd.to_numeric(demand[value_col], errors="coerce")
    if peaks.isna().any():
        raise InputError(f"demand frame: column {value_col!r} has a value that is not a number")
    if not peaks.between(0, MAX_GPUS).all():
        raise InputError(f"demand frame: column {value_col!r} has a value outside 0 … {MAX_GPUS:g} GPUs")
    resources = (
        demand["resource"].astype(str)
        if "resource" in demand.columns
        else pd.Series(settings.resource, index=demand.index)
    )
    out: dict[Key, Demand] = {}
    for i, (queue, resource, peak) in enumerate(zip(demand[queue_col].astype(str), resources, peaks, strict=True)):
        key = (queue, str(resource))
        if key not in out or float(peak) > out[key].peak:  # two rows for one queue: the larger wins
            out[key] = Demand(float(peak), _label(demand.iloc[i].to_dict()))
    return out


def combine(
    deserved_q: float, capability_q: float, demand: Demand | None, *, quantile_name: str, unknown: str | None = None
) -> Combined:
    """Apply the rule to one queue: ``demand`` None means unknown (``unknown`` says why, if known)."""
    d_q, c_q = max(float(deserved_q), 0.0), max(float(capability_q), 0.0)
    forecast_words = f"forecast {quantile_name} {d_q:.1f}"
    if demand is None:
        why = f"; demand unknown: {unknown}" if unknown else ""
        return Combined(d_q, c_q, {}, forecast_words + why)
    codes = {}
    if demand.peak > d_q:
        codes["deserved"] = "demand"
        basis = f"{demand.label} {demand.peak:.1f} > {forecast_words}"
    else:
        basis = f"{forecast_words} ≥ {demand.label} {demand.peak:.1f}"
    if demand.peak > c_q:
        codes["capability"] = "demand"
    return Combined(max(d_q, demand.peak), max(c_q, demand.peak), codes, basis)
