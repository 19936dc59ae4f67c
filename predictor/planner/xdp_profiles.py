"""Choose a node's XDP load-balancing profile from forecast network load and the running job mix.

Pure: numbers in, a ``Profile`` out, no I/O, so the policy is testable offline and the node agent only
wires inputs to the actuator. The rules, in order:

1. Forecasts older than ``stale_after_s`` (or missing) → an *observe-only* profile (the node agent does
   not get here: it holds the profile in force on such inputs instead); the datapath keeps
   counting what it would do but steers nothing (never act on garbage).
2. Each target gets weight in proportion to its spare bandwidth: capacity × (1 − headroom) − forecast.
   Headroom grows with the share of multi-node jobs, whose socket/NCCL traffic competes for the links.
3. A target with zero capacity (link down) gets 0; every other target keeps ``min_weight`` so it stays
   warm. When no target has spare bandwidth, weights follow capacity.
4. Many multi-node jobs → a sticky profile, so switches do not move their long-lived flows.
5. A new profile that differs from the current one by less than ``dead_band`` (total-variation distance
   of the weights) is not worth the churn: the current one is kept (no flip-flop).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from predictor.errors import InputError
from predictor.planner.xdp_slots import apportion, total_variation
from predictor.planner.xdp_types import NAME_MAX, Profile

__all__ = ["JobMix", "TargetLoad", "XdpPolicy", "choose_profile"]


@dataclass(frozen=True)
class TargetLoad:
    """One steering target: its capacity and the forecast load on it for the coming period."""

    iface: str
    capacity_bps: float
    forecast_bps: float | None  # None: no forecast for this target


@dataclass(frozen=True)
class JobMix:
    """Shares (0..1) of the node's GPUs by job kind, from the scheduler's view of running jobs."""

    distributed_share: float = 0.0  # multi-node training: long-lived, bandwidth-hungry socket flows
    ingest_share: float = 0.0  # data-loading heavy jobs: many short flows, bursty


class XdpPolicy(BaseModel):
    """Knobs of the profile policy (part of the agent's settings)."""

    model_config = ConfigDict(extra="forbid")

    scale: int = Field(100, ge=1, le=10_000, description="Sum of the weights of a chosen profile.")
    min_weight: int = Field(1, ge=0, le=100, description="Weight kept by every target that is up.")
    base_headroom: float = Field(0.1, ge=0, lt=1, description="Capacity fraction never planned for.")
    distributed_headroom: float = Field(
        0.2, ge=0, lt=1, description="Extra headroom at a job mix of 100 % multi-node jobs."
    )
    sticky_above: float = Field(
        0.5, ge=0, le=1, description="Distributed share above which the profile keeps flows sticky."
    )
    stale_after_s: float = Field(
        5400.0,
        gt=0,
        description="Network forecasts older than this (by their generated_at) are not acted on: the agent "
        "holds the profile in force (choose_profile alone returns an observe-only profile). The loop "
        "publishes a forecast of the next hour once per loop.interval_s (3600 s by default), so 1.5 "
        "intervals means a missed cycle. The XDP agent's own threshold, not planner.stale_after_s.",
    )
    dead_band: float = Field(
        0.05, ge=0, lt=1, description="Keep the current profile when the change is smaller than this."
    )


def _name(node: str, suffix: str) -> str:
    keep = NAME_MAX - len(suffix) - 1
    return f"{node[:keep]}-{suffix}"


def choose_profile(
    node: str,
    targets: Sequence[TargetLoad],
    mix: JobMix,
    *,
    forecast_age_s: float | None,
    policy: XdpPolicy | None = None,
    current: Profile | None = None,
) -> Profile:
    """The profile ``node`` should run next (see the module docstring for the rules)."""
    policy = policy or XdpPolicy()
    if not targets:
        raise InputError(f"node {node}: no XDP targets to plan for")
    for t in targets:
        if not math.isfinite(t.capacity_bps) or t.capacity_bps < 0:
            raise InputError(f"node {node}: capacity of {t.iface} must be a non-negative number")
    capacity = [t.capacity_bps for t in targets]
    if sum(capacity) <= 0:
        raise InputError(f"node {node}: every target has zero capacity")
    up = [c > 0 for c in capacity]

    forecasts = [t.forecast_bps for t in targets]
    stale = (
        forecast_age_s is None
        or forecast_age_s > policy.stale_after_s
        or any(f is None or not math.isfinite(f) or f < 0 for f in forecasts)
    )
    if stale:
        # Keep counting with the weights in force (or capacity-proportional ones) but steer nothing.
        if current is not None:
            base = dict(current.weights)
        else:
            base = dict(zip((t.iface for t in targets), capacity_weights(capacity, policy), strict=True))
        return Profile(name=_name(node, "observe"), weights=base, observe=True, sticky=False)

    headroom = min(0.9, policy.base_headroom + mix.distributed_share * policy.distributed_headroom)
    spare = [max(c * (1 - headroom) - (f or 0.0), 0.0) for c, f in zip(capacity, forecasts, strict=True)]
    raw = spare if sum(spare) > 0 else capacity
    weights = _weights(raw, up, policy)
    proposal = Profile(
        name=_name(node, "spare"),
        weights={t.iface: w for t, w in zip(targets, weights, strict=True)},
        observe=False,
        sticky=mix.distributed_share > policy.sticky_above,
    )
    if current is not None and _close(current, proposal, policy.dead_band):
        return current
    return proposal


def capacity_weights(capacity: Sequence[float], policy: XdpPolicy) -> list[int]:
    return _weights(capacity, [c > 0 for c in capacity], policy)


def _weights(raw: Sequence[float], up: Sequence[bool], policy: XdpPolicy) -> list[int]:
    # Integer weights summing to ``scale`` (largest remainder), then the warm-keeping floor.
    resolution = 1_000_000
    ints = [round(r / max(raw) * resolution) if max(raw) > 0 else 0 for r in raw]
    if sum(ints) == 0:
        ints = [1 if u else 0 for u in up]
    counts = apportion(ints, policy.scale)
    return [max(c, policy.min_weight) if u else 0 for c, u in zip(counts, up, strict=True)]


def _close(current: Profile, proposal: Profile, dead_band: float) -> bool:
    if (current.observe, current.sticky, set(current.weights)) != (
        proposal.observe,
        proposal.sticky,
        set(proposal.weights),
    ):
        return False
    keys = sorted(proposal.weights)
    a = [current.weights[k] for k in keys]
    b = [proposal.weights[k] for k in keys]
    if sum(a) <= 0:
        return False
    return total_variation(a, b) < dead_band
