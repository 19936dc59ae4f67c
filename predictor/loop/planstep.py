"""The loop's "inputs → plan" step as one function, so the loop and ``predictor report`` cannot drift apart.

A cycle reads history, forecasts with the served champion, predicts demand peaks, reads the queues, nodes
and workload (gang floors, pending GPUs), checks capacity against the remembered reference and calls
``predictor.planner.plan_cycle`` with the stabilisation memory and the cooldowns. ``plan_step`` does exactly
that and nothing with side effects (no audit record, no state file, no plan file): the loop writes those
from its result, and the report renders the very same plan.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from models.frames import ID, TIME, VALUE
from predictor.config import Settings
from predictor.errors import DataSourceError, ModelError, PredictorError, RegistryError
from predictor.loop import capacity
from predictor.loop.demand import DemandPrediction, DemandReader, model_uri
from predictor.loop.inputs import ClusterReader, Forecaster, HistoryReader, WorkloadReader
from predictor.loop.react import with_pending
from predictor.planner import Memory, QueuePlan, forecast_resources, plan_cycle, queues_from_list, stale_series
from predictor.planner.state import is_queue_name
from predictor.planner.workload import Workload

log = logging.getLogger(__name__)

__all__ = ["FrameHistory", "Inputs", "PlanStep", "plan_step", "read_demand", "read_inputs", "read_workload"]


@dataclass
class Inputs:
    """What a cycle plans from: the forecast, its model versions, a hold of every queue, per-queue holds, demand."""

    forecast: pd.DataFrame | None = None
    versions: dict[str, str] = field(default_factory=dict)
    hold: tuple[str, str] | None = None
    held: dict[str, tuple[str, str]] = field(default_factory=dict)
    demand: DemandPrediction | None = None
    history: pd.DataFrame | None = None  # what was forecast from (the root-cause demand trigger reads it)

    def models(self) -> dict[str, str]:
        """Family → model URI of every model served this cycle (forecast and demand)."""
        versions = {**self.versions, **(self.demand.versions if self.demand else {})}
        return {family: model_uri(family, str(v)) for family, v in sorted(versions.items())}


@dataclass
class PlanStep:
    """One planning step's result. ``plan`` is ``None`` when the queues or nodes could not be read (then
    ``hold`` is ``source_down`` and nothing else was computed)."""

    inputs: Inputs
    plan: QueuePlan | None
    hold: tuple[str, str] | None
    objects: list[dict[str, Any]] = field(default_factory=list)
    capacity: capacity.CapacityCheck | None = None
    workload: Workload | None = None


class FrameHistory:
    """A history already in memory (the report's), cut at ``now`` over the lookback ``FileHistory`` uses."""

    def __init__(self, frame: pd.DataFrame, *, lookback_h: float = 28 * 24) -> None:
        self.frame, self.lookback = frame, pd.Timedelta(hours=lookback_h)

    def history(self, now: pd.Timestamp) -> pd.DataFrame:
        frame = self.frame
        keep = (frame[TIME] <= now) & (frame[TIME] > now - self.lookback)
        return frame.loc[keep, [ID, TIME, VALUE]].reset_index(drop=True)


def read_inputs(
    settings: Settings,
    now: pd.Timestamp,
    history_reader: HistoryReader,
    forecaster: Forecaster,
    demand: DemandReader | None,
) -> Inputs:
    """The forecast, model versions, a hold of everything, and per-queue holds (stale or unusable series)."""
    try:
        history = history_reader.history(now)
    except DataSourceError as exc:
        return Inputs(hold=("source_down", f"history unavailable: {exc}"))
    if history.empty:
        return Inputs(hold=("stale_data", "no history in the lookback window"))
    ids = history[ID].astype(str)
    bad = sorted({q for q in ids.unique() if not is_queue_name(q)})
    stale = stale_series(history, settings.planner, now=now)
    held = {q: ("stale_data", reason) for q, reason in stale.items()}
    history = history.loc[~ids.isin(set(held) | set(bad))]
    if history.empty:
        # Nothing fresh at all: the whole cycle holds, as it does when every queue went quiet.
        reason = min(held.values())[1] if held else f"no history series is a valid queue name: {bad[0]!r}"
        return Inputs(hold=("stale_data", reason), held=held)
    try:
        frame, versions = forecaster.forecast(history, horizon=math.ceil(settings.planner.horizon_h) + 1)
    except (RegistryError, ModelError) as exc:
        return Inputs(hold=("missing_model", f"no usable model: {exc}"), held=held)
    return Inputs(frame, versions, None, held, read_demand(demand, history, now), history)


def read_demand(demand: DemandReader | None, history: pd.DataFrame, now: pd.Timestamp) -> DemandPrediction | None:
    """The demand model's peaks; a failure makes every queue's demand unknown, never zero, and holds nothing."""
    if demand is None:
        return None
    try:
        return demand.demand(history, now)
    except (DataSourceError, ModelError, RegistryError) as exc:
        why = f"demand unavailable: {exc}".splitlines()[0]
        return DemandPrediction(pd.DataFrame(), dict.fromkeys(sorted(history[ID].astype(str).unique()), why))


def read_workload(workload: WorkloadReader | None, now: pd.Timestamp) -> Workload | None:
    """This cycle's jobs and GPU nodes; a failed read is unknown (no gang floor), never an empty cluster."""
    if workload is None:
        return None
    try:
        return workload.workload(now)
    except (PredictorError, OSError):
        return None
    except Exception:  # malformed kube-state-metrics data (or a bug in reading it): unknown, and said
        log.warning("workload unreadable at %s: gang floors and pending GPUs unknown this cycle", now, exc_info=True)
        return None


def plan_step(
    settings: Settings,
    now: pd.Timestamp,
    *,
    inputs: Inputs,
    cluster: ClusterReader,
    workload: WorkloadReader | None,
    state: Mapping[str, Any],
    last_changed: Mapping[str, float],
) -> PlanStep:
    """Queues, nodes and workload read, capacity judged, and the loop's ``plan_cycle`` with memory and cooldowns.

    ``state``: the loop's state file (stabilisation memory, capacity reference; ``{}`` for a first cycle).
    ``last_changed``: the audit log's queue → unix time of its last change, for cooldowns.
    """
    psettings = settings.planner
    forecast = inputs.forecast
    try:
        objects = cluster.queue_objects()
        queues = queues_from_list(
            objects,
            source="live queues",
            allocated_milli=psettings.allocated_milli_units,
            manage=settings.actuators.queues.manage,
        )
        allocatable = cluster.allocatable(forecast_resources(forecast, psettings))
    except (PredictorError, OSError) as exc:
        return PlanStep(inputs, None, ("source_down", f"cannot read queues or nodes: {exc}"))
    jobs = read_workload(workload, now)
    queues = with_pending(queues, jobs, psettings.resource)  # unknown (no workload): left empty
    memory = Memory.from_json(state.get("memory", {}))
    checked = capacity.judge(
        state.get("capacity"),
        allocatable,
        cluster.gpu_nodes_not_ready(forecast_resources(forecast, psettings)),
        now,
        psettings,
    )
    plan, hold = plan_cycle(
        queues,
        forecast,
        psettings,
        now=now,
        allocatable=allocatable,
        memory=memory,
        last_changed=dict(last_changed),
        hold=inputs.hold or checked.hold,
        held_queues=inputs.held,
        previous_allocatable=checked.reference,
        workload=jobs,
        demand=inputs.demand.frame if inputs.demand else None,
        demand_unknown=inputs.demand.unknown if inputs.demand else None,
    )
    return PlanStep(inputs, plan, hold, objects, checked, jobs)
