"""Forecast bands as Prometheus gauges, so alert rules can use dynamic thresholds.

The loop owns ``/metrics`` and its ``CollectorRegistry``; it calls ``export_forecast_bands(registry,
forecast, at=now)`` after each forecast, with its own clock. The gauges ``predictor_forecast_upper{series=...}``
and ``predictor_forecast_lower{series=...}`` hold the band of the forecast step that covers ``at``, so a rule
compares the live series with them (``examples/alerts/forecast-bands.yaml``, the PrometheusRule's
``PredictorQueueDemandAnomaly*``). The loop forecasts per queue, so ``series`` is the queue name; there is
no cluster-wide band (a sum of queue bands is not a band of the sum). Series that vanish from a newer
forecast are removed, not left at a stale value.

``step_at`` is the one definition of "the forecast step that covers a time": the loop's per-queue
``predictor_loop_forecast_gpus{band}`` gauges use it too, so both families always show the same step.
"""

from __future__ import annotations

import weakref

import numpy as np
import pandas as pd
from prometheus_client import CollectorRegistry, Gauge

from models.frames import ID, TIME
from predictor.errors import InputError

__all__ = ["LOWER", "UPPER", "export_forecast_bands", "step_at"]

UPPER = "predictor_forecast_upper"
LOWER = "predictor_forecast_lower"
_GAUGES: weakref.WeakKeyDictionary[CollectorRegistry, tuple[Gauge, Gauge]] = weakref.WeakKeyDictionary()


def _gauges(registry: CollectorRegistry) -> tuple[Gauge, Gauge]:
    if registry not in _GAUGES:
        upper = Gauge(
            UPPER, "Upper bound of the forecast interval for the current step.", ["series", "level"], registry=registry
        )
        lower = Gauge(
            LOWER, "Lower bound of the forecast interval for the current step.", ["series", "level"], registry=registry
        )
        _GAUGES[registry] = (upper, lower)
    return _GAUGES[registry]


def step_at(forecast: pd.DataFrame, at: pd.Timestamp) -> pd.DataFrame:
    """One row per series: the forecast step that covers ``at``.

    That is the last step with ``timestamp <= at``, or the first step when the whole forecast lies after
    ``at`` (a forecast made at ``at`` starts one step later: its first step is the one in force).
    """
    when = pd.Timestamp(at)
    frame = forecast.assign(**{TIME: pd.to_datetime(forecast[TIME], utc=True)}).sort_values([ID, TIME])
    past = frame[frame[TIME] <= when].groupby(ID).tail(1)
    future = frame[~frame[ID].isin(past[ID])].groupby(ID).head(1)
    return pd.concat([past, future])


def export_forecast_bands(
    registry: CollectorRegistry,
    forecast: pd.DataFrame,
    *,
    level: int = 80,
    at: pd.Timestamp,
    current: pd.DataFrame | None = None,
) -> int:
    """Register (once) and set the band gauges from a forecast frame; returns the series exported.

    For each series the row used is ``step_at(forecast, at)``: the caller's clock, never the wall clock.
    ``current``: that ``step_at`` where the caller has it already (the loop does, for its own gauges).
    """
    lo, hi = f"lo-{level}", f"hi-{level}"
    missing = [c for c in (ID, TIME, lo, hi) if c not in forecast.columns]
    if missing:
        raise InputError(f"forecast frame lacks column(s) {', '.join(missing)} for level {level}")
    current = step_at(forecast, at) if current is None else current
    upper, lower = _gauges(registry)
    upper.clear()
    lower.clear()
    for sid, lo_v, hi_v in zip(current[ID].astype(str), current[lo], current[hi], strict=True):
        if np.isfinite(lo_v) and np.isfinite(hi_v):
            upper.labels(series=sid, level=str(level)).set(float(hi_v))
            lower.labels(series=sid, level=str(level)).set(float(lo_v))
    return int(np.isfinite(current[[lo, hi]].to_numpy(dtype=np.float64)).all(axis=1).sum())
