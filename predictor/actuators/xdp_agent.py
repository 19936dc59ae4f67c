"""The node agent: read this node's forecast inputs, choose a profile, apply it; repeat on an interval.

It runs as the DaemonSet in ``k8s/`` beside a loaded load balancer. The loop (``predictor loop`` with
``loop.xdp``, ``predictor.loop.xdp``) publishes one inputs document per node (forecast network load per
target, the job mix, when it was computed) as a key of the ConfigMap the DaemonSet mounts, and as
``<plan_dir>/xdp/<node>.json``; the agent owns nothing but that read → ``choose_profile`` →
``plan``/``apply`` cycle, so a crash loses nothing: the profile lives in the pinned maps and the next cycle
converges again. Inputs for another node, dated in the future, without a forecast for a target, or older
than ``policy.stale_after_s`` hold the profile in force (``inputs_invalid``, ``stale_inputs``): a loop
that went quiet says nothing about the links, so nothing is switched, not even to observe-only.

Whatever stops a cycle — nothing loaded yet (the load Job has not run on this node), no bpffs, unreadable
inputs, a failed switch — holds the datapath as it is: the agent says why (one log line when that state
changes, ``predictor_xdp_agent_holding`` on ``/metrics``) and retries on its interval, instead of exiting
and crash-looping its pod.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from predictor.actuators import Change
from predictor.actuators.xdp import XdpActuator
from predictor.errors import ConfigError, EnvironmentUnsupportedError, InputError, PredictorError
from predictor.planner.xdp_profiles import JobMix, TargetLoad, XdpPolicy, choose_profile
from predictor.planner.xdp_types import Profile
from predictor.userfiles import read_as

__all__ = [
    "HOLD_REASONS",
    "AgentSettings",
    "AgentState",
    "CycleResult",
    "ForecastInputs",
    "TargetInput",
    "load_agent_settings",
    "log_lines",
    "run_agent",
]

# Why a cycle held the datapath as it is (the ``reason`` label of predictor_xdp_agent_holding).
HOLD_REASONS = (
    "not_loaded",
    "unsupported",
    "unreadable",
    "inputs_unreadable",
    "inputs_invalid",
    "stale_inputs",
    "apply_failed",
)
CLOCK_SKEW_S = 300.0  # inputs dated further ahead than this are invalid (a wrong clock, not a forecast)


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
    node: str | None = Field(None, description="The node these inputs are for; another node's inputs are refused.")
    queues: dict[str, float] = Field(
        default_factory=dict,
        description="GPUs of running pods per queue on the node (the job mix the shares come from; informational).",
    )
    forecaster: str | None = Field(None, description="What forecast the network load (informational).")


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
    metrics_address: str = Field(
        "127.0.0.1",
        min_length=1,
        description="Address /metrics listens on. The agent runs on the host network, so the default is "
        "loopback; k8s/ sets the node's IP (downward API status.hostIP), where Prometheus scrapes it.",
    )
    policy: XdpPolicy = Field(default_factory=XdpPolicy)  # type: ignore[arg-type]


class CycleResult(BaseModel):
    """One agent cycle, printed as a JSON line."""

    at: datetime
    profile: str | None
    changes: list[dict[str, Any]]
    applied: bool
    error: str | None = None
    hold: str | None = Field(None, description="Why this cycle held the datapath as it is (HOLD_REASONS).")


def load_agent_settings(path: Path) -> AgentSettings:
    return read_as(AgentSettings, path, "agent config", ConfigError)


def read_inputs(path: Path) -> ForecastInputs:
    inputs = read_as(ForecastInputs, path, "forecast inputs", InputError)
    if inputs.generated_at.tzinfo is None:
        raise InputError(f"forecast inputs {path}: generated_at needs a timezone")
    return inputs


def _current_profile(actuator: XdpActuator) -> Profile | None:
    status = actuator.status()
    if status.active_profile is None or not any(status.weights.values()):
        return None
    return Profile(name=status.active_profile, weights=status.weights, observe=status.observe, sticky=status.sticky)


def _held(now: datetime, reason: str, exc: Exception, profile: str | None = None) -> CycleResult:
    return CycleResult(at=now, profile=profile, changes=[], applied=False, error=str(exc), hold=reason)


def agent_cycle(settings: AgentSettings, actuator: XdpActuator, now: datetime) -> CycleResult:
    """One read → choose → plan → apply; anything that stops it holds the datapath as it is and says why."""
    try:
        current = _current_profile(actuator)
    except EnvironmentUnsupportedError as exc:  # not root, no bpffs mount, no libbpf
        return _held(now, "unsupported", exc)
    except InputError as exc:  # nothing pinned at pin_dir: the load Job has not run on this node yet
        return _held(now, "not_loaded", exc)
    except PredictorError as exc:
        return _held(now, "unreadable", exc)
    try:
        inputs = read_inputs(settings.inputs)
    except (PredictorError, OSError, ValueError, RecursionError) as exc:
        # Whatever a loop (or a person) left in the file — not UTF-8, nested too deep, too large, cut off —
        # holds the datapath as it is: a node's links must never depend on that file parsing.
        return _held(now, "inputs_unreadable", exc)
    # Stale or invalid inputs hold the profile in force (no switch at all, not even to observe-only): a
    # loop that stopped publishing says nothing about the links, so the datapath keeps what it has.
    age = (now - inputs.generated_at).total_seconds()
    problem = _invalid(settings, inputs, age)
    if problem:
        return _held(now, "inputs_invalid", InputError(f"forecast inputs {settings.inputs}: {problem}"))
    if age > settings.policy.stale_after_s:
        return _held(
            now,
            "stale_inputs",
            InputError(
                f"forecast inputs {settings.inputs} are {age:.0f} s old (policy.stale_after_s "
                f"{settings.policy.stale_after_s:g}): holding the current profile"
            ),
        )
    try:
        profile = choose_profile(
            settings.node,
            [TargetLoad(t.iface, t.capacity_bps, t.forecast_bps) for t in inputs.targets],
            JobMix(inputs.distributed_share, inputs.ingest_share),
            forecast_age_s=age,
            policy=settings.policy,
            current=current,
        )
    except InputError as exc:  # e.g. every target at zero capacity
        return _held(now, "inputs_invalid", exc)
    try:
        changes: list[Change] = actuator.plan(profile)
        actuator.apply(changes, dry_run=settings.dry_run)
    except (PredictorError, OSError) as exc:  # e.g. unloaded mid-cycle, or inputs name a target not loaded
        return _held(now, "apply_failed", exc, profile.name)
    return CycleResult(
        at=now,
        profile=profile.name,
        changes=[c.to_dict() for c in changes],
        applied=bool(changes) and not settings.dry_run,
    )


def _invalid(settings: AgentSettings, inputs: ForecastInputs, age_s: float) -> str:
    if inputs.node is not None and inputs.node != settings.node:
        return f"written for node {inputs.node!r}, this is {settings.node!r}"
    if age_s < -CLOCK_SKEW_S:
        return f"generated_at is {-age_s:.0f} s in the future"
    missing = [t.iface for t in inputs.targets if t.forecast_bps is None]
    if missing:
        return f"no forecast for target {missing[0]}"
    names = [t.iface for t in inputs.targets]
    if len(set(names)) != len(names):
        return "a target is listed twice"
    return ""


@dataclass
class AgentState:
    """The last cycle's outcome, shared with the ``/metrics`` collector (read at scrape time)."""

    hold: str | None = None
    error: str | None = None

    def record(self, result: CycleResult) -> None:
        self.hold, self.error = result.hold, result.error


def run_agent(
    settings: AgentSettings,
    actuator: XdpActuator,
    *,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
    state: AgentState | None = None,
) -> Iterator[CycleResult]:
    """Yield one result per cycle; stops after ``max_cycles`` (0: never). A held cycle is retried on the
    next interval; ``state`` (read by the ``/metrics`` collector) follows every cycle."""
    cycle = 0
    while settings.max_cycles == 0 or cycle < settings.max_cycles:
        if cycle:
            sleep(settings.interval_s)
        result = agent_cycle(settings, actuator, clock())
        if state is not None:
            state.record(result)
        yield result
        cycle += 1


def log_lines(results: Iterable[CycleResult]) -> Iterator[CycleResult]:
    """The results worth a log line: every cycle that ran, and a held one only when the hold changes.

    A node waiting for its load Job would otherwise print the same line every interval, for hours.
    """
    last: tuple[str | None, str | None] | None = None
    for result in results:
        key = (result.hold, result.error)
        if result.hold is None or key != last:
            yield result
        last = key
