"""The node agent: read this node's forecast inputs, choose a profile, apply it; repeat on an interval.

It runs as the DaemonSet in ``k8s/`` beside a loaded load balancer. The loop (``predictor loop``) writes
one inputs file per node (forecast network load per target, the job mix, when it was computed); the
agent owns nothing but that read → ``choose_profile`` → ``plan``/``apply`` cycle, so a crash loses
nothing: the profile lives in the pinned maps and the next cycle converges again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from predictor.actuators import Change
from predictor.actuators.xdp import XdpActuator
from predictor.actuators.xdp_profiles import Profile
from predictor.errors import ConfigError, InputError
from predictor.planner.xdp_profiles import JobMix, TargetLoad, XdpPolicy, choose_profile
from predictor.userfiles import first_problem, read_structured

__all__ = ["AgentSettings", "CycleResult", "ForecastInputs", "load_agent_settings", "run_agent"]


class TargetInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    iface: str
    capacity_bps: float = Field(ge=0)
    forecast_bps: float | None = Field(None, ge=0)


class ForecastInputs(BaseModel):
    """What the loop writes for one node (JSON or YAML)."""

    model_config = ConfigDict(extra="forbid")

    generated_at: datetime = Field(description="When the forecasts were computed (tz-aware).")
    targets: list[TargetInput] = Field(min_length=1)
    distributed_share: float = Field(0.0, ge=0, le=1)
    ingest_share: float = Field(0.0, ge=0, le=1)


class AgentSettings(BaseModel):
    """``predictor xdp agent --agent-config FILE``."""

    model_config = ConfigDict(extra="forbid")

    node: str = Field(min_length=1, description="This node's name (used in profile names).")
    pin_dir: Path = Field(description="bpffs directory of the loaded load balancer.")
    inputs: Path = Field(description="Forecast inputs file written by the loop for this node.")
    interval_s: float = Field(60.0, gt=0, le=86_400, description="Seconds between cycles.")
    max_cycles: int = Field(1, ge=0, description="Cycles to run; 0 runs until stopped.")
    dry_run: bool = Field(True, description="Plan only (safe default); set false to switch profiles.")
    metrics_port: int | None = Field(
        None, ge=1, le=65535, description="Serve predictor_xdp_* per-target counters on this port (/metrics)."
    )
    policy: XdpPolicy = Field(default_factory=XdpPolicy)  # type: ignore[arg-type]


class CycleResult(BaseModel):
    """One agent cycle, printed as a JSON line."""

    at: datetime
    profile: str | None
    changes: list[dict[str, Any]]
    applied: bool
    error: str | None = None


def load_agent_settings(path: Path) -> AgentSettings:
    data = read_structured(path, "agent config", ConfigError)
    try:
        return AgentSettings.model_validate(data)
    except ValidationError as exc:
        where, problem = first_problem(exc, "agent config")
        raise ConfigError(f"invalid agent config {path}: {where}: {problem}") from exc


def read_inputs(path: Path) -> ForecastInputs:
    data = read_structured(path, "forecast inputs", InputError)
    try:
        inputs = ForecastInputs.model_validate(data)
    except ValidationError as exc:
        where, problem = first_problem(exc, "forecast inputs")
        raise InputError(f"invalid forecast inputs {path}: {where}: {problem}") from exc
    if inputs.generated_at.tzinfo is None:
        raise InputError(f"forecast inputs {path}: generated_at needs a timezone")
    return inputs


def _current_profile(actuator: XdpActuator) -> Profile | None:
    status = actuator.status()
    if status.active_profile is None or not any(status.weights.values()):
        return None
    return Profile(
        name=status.active_profile, weights=status.weights, observe=status.observe, sticky=status.sticky
    )


def agent_cycle(settings: AgentSettings, actuator: XdpActuator, now: datetime) -> CycleResult:
    """One read → choose → plan → apply; unreadable inputs hold the current profile."""
    try:
        inputs = read_inputs(settings.inputs)
    except InputError as exc:
        return CycleResult(at=now, profile=None, changes=[], applied=False, error=str(exc))
    profile = choose_profile(
        settings.node,
        [TargetLoad(t.iface, t.capacity_bps, t.forecast_bps) for t in inputs.targets],
        JobMix(inputs.distributed_share, inputs.ingest_share),
        forecast_age_s=(now - inputs.generated_at).total_seconds(),
        policy=settings.policy,
        current=_current_profile(actuator),
    )
    changes: list[Change] = actuator.plan(profile)
    actuator.apply(changes, dry_run=settings.dry_run)
    return CycleResult(
        at=now,
        profile=profile.name,
        changes=[c.to_dict() for c in changes],
        applied=bool(changes) and not settings.dry_run,
    )


def run_agent(
    settings: AgentSettings,
    actuator: XdpActuator,
    *,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[CycleResult]:
    """Yield one result per cycle; stops after ``max_cycles`` (0: never)."""
    cycle = 0
    while settings.max_cycles == 0 or cycle < settings.max_cycles:
        if cycle:
            sleep(settings.interval_s)
        yield agent_cycle(settings, actuator, clock())
        cycle += 1
