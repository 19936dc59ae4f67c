"""Energy advice: a GPU power cap per workload, with the energy it saves per week and the slowdown it costs.

A power cap (``nvidia-smi -pl``, or the GPU operator's power-limit setting) lowers clocks when a GPU would
draw more. Work that keeps the SMs busy slows down about as much as the clock drops; work that waits on
memory, input or communication (low SM utilisation) loses little, because its time is not spent on the
SMs. The estimate here is deliberately simple and stated in the reason: at a cap ``C`` below a run's mean
power ``P``, the slowdown is ``u · (1 − C/P)`` (``u`` the SM utilisation share, clocks assumed to fall no
faster than power — they fall slower, so this errs on the side of caution) and the energy becomes
``C · T · (1 + slowdown)`` instead of ``P · T``. The cap is the lowest on a grid of the card's observed
peak power that keeps the estimated slowdown within ``max_slowdown``, never below ``min_cap_share`` of it
(cards refuse limits far below their default). Energy per week scales the runs' saving to the workload's
weekly run rate.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["EnergySettings", "power_advice"]

MIN_KWH_WEEK = 0.1  # below this a cap is not worth a change request


class EnergySettings(BaseModel):
    """How far a power cap may go."""

    model_config = ConfigDict(extra="forbid")

    max_slowdown: float = Field(0.05, ge=0, le=0.5, description="Largest estimated slowdown a cap may cost.")
    min_cap_share: float = Field(0.5, gt=0, le=1, description="Lowest cap as a share of the card's peak power.")


def power_advice(g: pd.DataFrame, card_peak_w: float, settings: EnergySettings) -> tuple[float, float, str]:
    """(cap W, kWh saved per week, advice in words) for one workload's runs; NaNs without power series."""
    power = g["power_mean_w"].to_numpy(np.float64)
    ok = np.isfinite(power) & np.isfinite(g["energy_kwh"].to_numpy(np.float64))
    if not ok.any() or not np.isfinite(card_peak_w) or card_peak_w <= 0:
        return float("nan"), float("nan"), ""
    power = power[ok]
    energy = g["energy_kwh"].to_numpy(np.float64)[ok]
    util = np.clip(g["util_mean"].to_numpy(np.float64)[ok] / 100, 0, 1)
    best = (card_peak_w, 0.0, 0.0)
    for cap in card_peak_w * np.arange(1.0, settings.min_cap_share - 1e-9, -0.05):
        slowdown = util * np.clip(1 - cap / power, 0, None)
        if np.average(slowdown, weights=energy) > settings.max_slowdown:
            break
        saved = float(np.sum(energy * (1 - np.minimum(cap, power) * (1 + slowdown) / power)))
        best = (float(cap), saved, float(np.average(slowdown, weights=energy)))
    cap, saved, slowdown = best
    span_weeks = max((g["end"].max() - g["start"].min()).total_seconds() / (7 * 86400), 1.0)
    per_week = saved / span_weeks
    if per_week < MIN_KWH_WEEK:
        return float("nan"), 0.0, ""
    return (
        round(cap),
        round(per_week, 2),
        (
            f"power cap {cap:.0f} W (mean draw {np.average(power, weights=energy):.0f} W, utilisation "
            f"{np.average(util, weights=energy):.0%}): {per_week:.1f} kWh/week saved, about {slowdown:.1%} slower"
        ),
    )
