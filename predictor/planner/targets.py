"""Raw quota targets from a forecast frame (and optional demand predictions), before any safety rule.

Kept apart from the safety policy so that the policy can be property-tested against arbitrary targets:
whatever this module proposes, ``safety`` decides what may be written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from models.frames import ID, TIME
from predictor.errors import InputError
from predictor.planner.demand_rule import UNKNOWN_NO_ROW, combine, demand_peaks
from predictor.planner.objective import mixture_quantile
from predictor.planner.quantity import MAX_GPUS
from predictor.planner.settings import PlannerSettings
from predictor.planner.state import check_queue_name
from predictor.planner.tail import step_quantiles, tail_name

__all__ = ["Target", "ceil_to", "check_forecast_columns", "floor_to", "forecast_resources", "forecast_targets"]

Key = tuple[str, str]  # (queue, resource)


@dataclass(frozen=True)
class Target:
    """What the forecast (and demand) ask for one queue and resource, in GPUs, and the words explaining it.

    ``codes`` names what set a field when it was not the forecast (``{"deserved": "demand"}``).
    """

    deserved: float
    capability: float
    guarantee: float
    basis: str
    # Set by predictor.planner.gangs from the workload: (field, code, reason) for every value a rule moved,
    # the smallest capability the largest gang needs, and the GPUs of the pool the queue's jobs can reach.
    notes: tuple[tuple[str, str, str], ...] = ()
    capability_floor: float = 0.0
    ceiling: float | None = None
    codes: Mapping[str, str] = field(default_factory=dict)
    guarantee_from: str = ""  # the guarantee's own source (the forecast's floor), when it is not ``basis``

    def code(self, name: str) -> str:
        return self.codes.get(name, "forecast")

    def basis_for(self, name: str) -> str:
        """The words behind field ``name``: the guarantee names its floor first (demand never sets it)."""
        if name == "capability" and self.code(name) == "borrow":
            return f"the live allocatable GPUs (planner.borrow: idle; deserved: {self.basis})"
        if name == "guarantee" and self.guarantee_from:
            return f"{self.guarantee_from} (deserved: {self.basis})"
        return self.basis


def ceil_to(value: float, step: int) -> float:
    # A tiny tolerance keeps 16.0000001 (float noise from headroom) from becoming 17.
    return float(math.ceil(value / step - 1e-9) * step)


def floor_to(value: float, step: int) -> float:
    return float(math.floor(value / step + 1e-9) * step)


def check_forecast_columns(
    forecast: pd.DataFrame, settings: PlannerSettings, *, source: str = "forecast frame"
) -> None:
    """The columns the planner reads (series id, time, the configured quantiles) are all there.

    With ``tail_quantile`` deserved reads the upper bands ``hi-80`` and ``hi-95`` (and ``mean`` where given)."""
    deserved = {"hi-80", "hi-95"} if _tail_level(settings) is not None else {settings.deserved_quantile}
    columns = {*deserved, settings.capability_quantile, settings.guarantee_quantile}
    missing = [c for c in (ID, TIME, *sorted(columns)) if c not in forecast.columns]
    if missing:
        known = ", ".join(map(str, forecast.columns))
        raise InputError(f"{source} is missing column {missing[0]!r} (columns: {known})")


def forecast_resources(forecast: pd.DataFrame | None, settings: PlannerSettings) -> list[str]:
    """Resource names a forecast sizes: its ``resource`` column (per GPU type), else the configured one."""
    if forecast is not None and "resource" in forecast.columns:
        return sorted({str(r) for r in forecast["resource"].unique()} | {settings.resource})
    return [settings.resource]


def forecast_targets(
    forecast: pd.DataFrame,
    settings: PlannerSettings,
    *,
    now: pd.Timestamp,
    demand: pd.DataFrame | None = None,
    demand_unknown: Mapping[str, str] | None = None,
) -> dict[Key, Target]:
    """Targets for every (queue, resource) the forecast covers in ``[now, now + horizon]``.

    A series whose forecast does not reach into that window is left out, so the caller holds it as stale.
    Demand combines by ``predictor.planner.demand_rule``; ``demand_unknown`` (queue → why) names queues
    whose demand could not be predicted. Given either, a queue without a demand row says demand is unknown.
    """
    check_forecast_columns(forecast, settings)
    for series in forecast[ID].astype(str).unique():
        check_queue_name(series, source=f"forecast frame {ID}")
    end = now + pd.Timedelta(hours=settings.horizon_h)
    times = pd.to_datetime(forecast[TIME], utc=True)
    window = forecast.loc[(times >= now) & (times < end)]
    resources = window["resource"].astype(str) if "resource" in window.columns else settings.resource
    frame = pd.DataFrame(
        {
            "queue": window[ID].astype(str),
            "resource": resources,
            "t": times.loc[window.index],
            "d": _deserved_per_step(window, settings),
            "c": pd.to_numeric(window[settings.capability_quantile], errors="coerce"),
            "g": pd.to_numeric(window[settings.guarantee_quantile], errors="coerce"),
        }
    )
    if not np.isfinite(frame[["d", "c", "g"]].to_numpy()).all():
        raise InputError("forecast frame has a missing or infinite value inside the planning horizon")
    if (frame[["d", "c", "g"]].to_numpy() > MAX_GPUS).any():
        raise InputError(f"forecast frame has a value above {MAX_GPUS:g} GPUs inside the planning horizon")
    duplicated = frame.duplicated(["queue", "resource", "t"])
    if duplicated.any():
        first = frame.loc[duplicated].iloc[0]
        raise InputError(f"forecast frame has two rows for queue {first['queue']!r} at {first['t'].isoformat()}")
    grouped = frame.groupby(["queue", "resource"], sort=False).agg(d=("d", "max"), c=("c", "max"), g=("g", "min"))
    if settings.objective is not None:  # the newsvendor optimum replaces the fixed quantiles (objective.py)
        grouped = _objective_levels(grouped, window.assign(queue=frame["queue"], resource=frame["resource"]), settings)
    peaks = demand_peaks(demand, settings)
    explain_unknown = demand is not None or demand_unknown is not None
    grow = 1.0 + settings.headroom
    step = settings.round_to
    out: dict[Key, Target] = {}
    arrays = (grouped["d"].to_numpy(float), grouped["c"].to_numpy(float), grouped["g"].to_numpy(float))
    for (queue, resource), d_q, c_q, g_q in zip(grouped.index, *arrays, strict=True):
        key = (str(queue), str(resource))
        limits = settings.limits(key[0])
        unknown = (demand_unknown or {}).get(key[0], UNKNOWN_NO_ROW) if explain_unknown else None
        both = combine(d_q, c_q, peaks.get(key), quantile_name=_deserved_source(settings), unknown=unknown)
        deserved = max(ceil_to(both.deserved * grow, step), limits.min_deserved)
        basis = both.basis
        if limits.max_deserved is not None and deserved > limits.max_deserved:
            deserved, basis = limits.max_deserved, basis + f", max_deserved {limits.max_deserved:g}"
        capability = max(ceil_to(both.capability * grow, step), deserved)
        if limits.max_capability is not None:
            capability = min(capability, max(limits.max_capability, deserved))
        guarantee = min(max(floor_to(max(float(g_q), 0.0), step), limits.min_guarantee), deserved)
        out[key] = Target(
            deserved=deserved,
            capability=capability,
            guarantee=guarantee,
            basis=f"{basis} +{settings.headroom:.0%} headroom",
            codes=both.codes,
            guarantee_from=f"forecast {settings.guarantee_quantile} {g_q:.1f}" if both.codes else "",
        )
    return out


def _tail_level(settings: PlannerSettings) -> float | None:
    """The tail quantile that sizes deserved, if any: ``planner.objective``, when set, wins over it."""
    return settings.tail_quantile if settings.objective is None else None


def _deserved_per_step(window: pd.DataFrame, settings: PlannerSettings) -> pd.Series:
    """Each step's deserved level: its ``tail_quantile`` quantile, or the fixed ``deserved_quantile`` column."""
    q = _tail_level(settings)
    if q is None:
        return pd.to_numeric(window[settings.deserved_quantile], errors="coerce")
    if window.empty:
        return pd.Series(dtype=float, index=window.index)
    # q > 0.5: the lower bands never bound it; without a mean the hi-80 → hi-95 segment is extended down.
    upper = window[[c for c in ("mean", "hi-80", "hi-95") if c in window.columns]]
    return pd.Series(step_quantiles(upper, q), index=window.index)


def _deserved_source(settings: PlannerSettings) -> str:
    objective, q = settings.objective, _tail_level(settings)
    if objective is not None:
        return f"newsvendor p={objective.deserved_level:.2f}"
    return settings.deserved_quantile if q is None else tail_name(q)


def _objective_levels(grouped: pd.DataFrame, window: pd.DataFrame, settings: PlannerSettings) -> pd.DataFrame:
    """Deserved and guarantee of each (queue, resource) as the mixture quantiles the objective asks for."""
    assert settings.objective is not None
    out = grouped.copy()
    for (queue, resource), steps in window.groupby(["queue", "resource"], sort=False):
        out.loc[(queue, resource), "d"] = mixture_quantile(steps, settings.objective.deserved_level)
        out.loc[(queue, resource), "g"] = mixture_quantile(steps, settings.objective.guarantee_level)
    return out


def targets_from_mapping(values: Mapping[Key, tuple[float, float, float]]) -> dict[Key, Target]:
    """Targets given directly (tests, what-if runs): ``{(queue, resource): (deserved, capability, guarantee)}``."""
    return {k: Target(deserved=d, capability=c, guarantee=g, basis="given") for k, (d, c, g) in values.items()}
