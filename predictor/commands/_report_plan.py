"""The report's plan is the loop's: ``predictor report`` wires the loop's readers and calls its planning step.

Same forecaster (the registry's champion, or ``--model`` fitted as ``loop --model`` fits it), same demand
model (the gpu-demand champion over the pending jobs, where the loop would serve it), same workload shaping
(kube-state-metrics pods and podgroups), the loop's stabilisation memory (``--state``) and cooldowns
(``--audit-log``), and ``predictor.loop.planstep.plan_step``, the function each loop cycle calls. The
guarantee comes from the Queue objects (``--queues`` file, or the API server with ``--kubeconfig``);
Volcano's metrics do not export it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from models.frames import ID, TIME
from predictor.errors import DataSourceError, InputError

if TYPE_CHECKING:
    from predictor.config import Settings
    from predictor.loop import ClusterReader, Forecaster
    from predictor.planner import QueuePlan, QueueState
    from predictor.reports.inputs import ReportInputs
    from predictor.sources import MetricSource

__all__ = ["LoopPlan", "QueueFiles", "loop_plan", "quotas_from_queues"]


@dataclass(frozen=True)
class QueueFiles:
    """Where the live queues and nodes are: files (``kubectl … -o json``) or the API server."""

    queues: Path | None = None
    nodes: Path | None = None
    kubeconfig: Path | None = None
    state: Path | None = None  # the loop's state file: stabilisation memory and capacity reference
    audit_log: Path | None = None  # the loop's audit log: cooldowns


@dataclass
class LoopPlan:
    plan: QueuePlan
    hold: tuple[str, str] | None
    forecast: pd.DataFrame  # over the report's window, for its tables and charts
    models: str  # the served model URIs, or the local forecaster's name
    plan_forecast: pd.DataFrame | None = None  # the first hours of it the plan was made from (None: held before)


class _Widened:
    """Forecast once over the report's window and answer the planner's shorter request from it.

    The models served here forecast step by step, so the first hours of a week-long forecast are the
    forecast the loop asks for: one fit (or one served prediction) feeds both the plan and the report.
    """

    def __init__(self, inner: Forecaster, hours: int) -> None:
        self.inner, self.hours = inner, hours
        self.frame: pd.DataFrame | None = None
        self.versions: dict[str, str] = {}

    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        self.frame, self.versions = self.inner.forecast(history, horizon=max(horizon, self.hours))
        first = self.frame.groupby(ID, sort=False)[TIME].transform("min")
        keep = self.frame[TIME] < first + pd.Timedelta(hours=horizon)
        return self.frame.loc[keep].reset_index(drop=True), self.versions


def quotas_from_queues(queues: list[QueueState], resource: str, known: set[str]) -> pd.DataFrame:
    """The report's quota table (``queue, resource, guarantee, deserved, capability``) from Queue objects.

    Queues the history knows, or that set a quota of ``resource``; the root queue is Volcano's own.
    """
    rows = []
    for q in sorted(queues, key=lambda q: q.name):
        if q.name == "root" or (q.name not in known and resource not in q.deserved):
            continue
        rows.append(
            {
                "queue": q.name,
                "resource": resource,
                "guarantee": float(q.guarantee.get(resource, 0.0)),
                "deserved": float(q.deserved.get(resource, 0.0)),
                "capability": float(q.capability.get(resource, float("inf"))),
            }
        )
    return pd.DataFrame(rows, columns=["queue", "resource", "guarantee", "deserved", "capability"])


def _cluster(inputs: ReportInputs, files: QueueFiles) -> tuple[ClusterReader, str]:
    """The queues and nodes the loop would read, and where they came from."""
    from predictor.loop import FileCluster
    from predictor.reports.recommend import node_objects, queue_objects
    from predictor.userfiles import read_structured

    if files.kubeconfig is not None:
        from predictor.actuators.volcano import VolcanoActuator, connect
        from predictor.loop import KubeCluster

        return KubeCluster(VolcanoActuator(connect(files.kubeconfig))), "Queue objects from the API server"
    if files.queues is not None:
        nodes = read_structured(files.nodes, "--nodes", InputError) if files.nodes else node_objects(inputs.total_gpus)
        return FileCluster(read_structured(files.queues, "--queues", InputError), nodes), f"--queues {files.queues}"
    nodes = read_structured(files.nodes, "--nodes", InputError) if files.nodes else node_objects(inputs.total_gpus)
    return FileCluster(queue_objects(inputs), nodes), ""


def loop_plan(
    inputs: ReportInputs,
    settings: Settings,
    *,
    files: QueueFiles,
    model: str | None,
    window_h: int,
    source: MetricSource | None = None,
    cluster: str | None = None,
) -> LoopPlan:
    """One loop planning step at the end of the history; fills ``inputs.quotas`` from the Queue objects.

    ``model``: a local forecaster, as ``loop --model`` (``None``: the registry's champion, and then the
    demand champion too where job data can be read). ``source``: the history's Prometheus (``None``: the
    history is files; then, as ``loop --history FILE``, no workload and no demand model). ``cluster``: one
    cluster of a fleet.
    """
    from predictor.actuators.audit import AuditLog, read_state
    from predictor.commands import _loop_parts as parts
    from predictor.loop import SourceHistory, SourceWorkload
    from predictor.loop.planstep import FrameHistory, plan_step, read_inputs
    from predictor.planner import queues_from_list

    reader, where = _cluster(inputs, files)
    p = settings.planner
    try:
        queues = queues_from_list(
            reader.queue_objects(), source=where or "queues", allocated_milli=p.allocated_milli_units
        )
    except OSError as exc:
        raise DataSourceError(f"cannot read the queues: {exc}") from exc
    if where:
        inputs.quotas = quotas_from_queues(queues, p.resource, set(inputs.quotas["queue"].astype(str)))
        inputs.notes[:] = [n for n in inputs.notes if not n.startswith("guarantee is not exported")]
        inputs.sources["quotas"] = where
    served = parts.forecaster(settings, model)
    if cluster is not None and model is None:
        from predictor.loop.fleet import QualifiedForecaster

        served = QualifiedForecaster(served, cluster)
    forecaster = _Widened(served, window_h)
    demand = None
    if model is None and source is not None:
        from predictor.loop.demand import SourceJobs

        demand = parts.demand(settings, SourceJobs(source))
    history = SourceHistory(source) if source is not None else FrameHistory(inputs.demand)
    now = inputs.as_of
    state: dict[str, Any] = read_state(files.state) if files.state else {}
    last_changed = AuditLog(files.audit_log).last_changed(settings.actuators.mode, cluster) if files.audit_log else {}
    read = read_inputs(settings, now, history, forecaster, demand)
    step = plan_step(
        settings,
        now,
        inputs=read,
        cluster=reader,
        workload=SourceWorkload(source) if source is not None else None,
        state=state,
        last_changed=last_changed,
    )
    if step.plan is None:
        raise DataSourceError((step.hold or ("", "cannot read queues or nodes"))[1])
    if step.hold:
        inputs.notes.append(f"every queue held, as the loop would: {step.hold[1]}")
    frame = forecaster.frame
    if frame is None:  # the loop held before forecasting (stale or unusable history): forecast for the report
        frame, forecaster.versions = served.forecast(inputs.demand, horizon=window_h)
    served_versions = {**read.versions, **(read.demand.versions if read.demand else {})} or forecaster.versions
    return LoopPlan(step.plan, step.hold, frame, ", ".join(served_versions.values()), read.forecast)
