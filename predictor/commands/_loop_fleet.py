"""``predictor loop`` over a fleet (clusters listed in the settings): the wiring and the summary.

Thin, like ``predictor.commands.loop``: per cluster its metrics source (``cluster_sources``), its Kubernetes
API (``kube_context`` / ``kubeconfig``), its Lease and plan directory (``cluster_settings``); one forecaster
and one demand model for the whole fleet; one audit log and local lock. The cycle is ``predictor.loop.fleet``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from predictor.commands import _loop_parts as parts
from predictor.commands._common import console
from predictor.errors import ActuatorError, ConfigError, InputError

if TYPE_CHECKING:
    from predictor.config import Settings
    from predictor.loop.demand import JobsReader
    from predictor.loop.fleet import FleetLoop
    from predictor.loop.inputs import HistoryReader, WorkloadReader
    from predictor.sources import MetricSource

__all__ = ["fleet_loop", "run_fleet_once"]


def fleet_loop(
    settings: Settings,
    *,
    history: Path | None,
    queues: Path | None,
    model: str | None,
    kubeconfig: Path | None,
    pending: Path | None,
) -> FleetLoop:
    """One ``Loop`` per listed cluster, sharing the forecaster, the audit log and the local lock."""
    from predictor.actuators.audit import AuditLog
    from predictor.actuators.volcano import VolcanoActuator, connect
    from predictor.loop import FileLock, KubeCluster, Loop
    from predictor.loop.fleet import FleetLoop, QualifiedForecaster, cluster_settings
    from predictor.loop.fleet_metrics import FleetMetrics
    from predictor.loop.inputs import ReportsServing
    from predictor.sources.clusters import cluster_sources

    if queues is not None:
        raise InputError(
            "--queues holds one cluster's queues: with clusters listed in the settings each "
            "cluster's queues come from its own API (kube_context)"
        )
    metrics = FleetMetrics(
        [c.name for c in settings.clusters],
        ready_within_s=settings.loop.ready_within_s,
        live_within_s=settings.loop.live_within_s,
        label_values={c.name: c.selector_value for c in settings.clusters},
    )
    served = parts.forecaster(settings, model)
    if isinstance(served, ReportsServing):  # the model in memory is the process's: reported once
        served.report_to(metrics.served)
    metrics.served.max_model_age(settings.mlflow.max_champion_age_days * 86400)
    audit = AuditLog(settings.actuators.audit_log)
    lock = FileLock(audit.path.with_name(audit.path.name + ".lock"))
    rca = parts.rca_model(settings, metrics.served)  # one champion in memory for the fleet, reported once
    loops = []
    for member in cluster_sources(settings):
        name, cluster = str(member.name), member.settings
        assert cluster is not None  # listed clusters always carry their settings
        try:
            api = connect(cluster.kubeconfig or kubeconfig, cluster.kube_context)
        except ActuatorError as exc:
            raise ConfigError(f"clusters {name}: {exc}") from exc
        actuator = VolcanoActuator(api)
        own = cluster_settings(settings, name)
        jobs = _jobs(pending, history, name, member.source)
        loop = Loop(
            own,
            cluster=KubeCluster(actuator),
            history=_history(history, name, member.source),
            forecaster=QualifiedForecaster(served, name),
            actuator=actuator,
            lease=parts.lease(own, actuator),
            workload=_workload(history, member.source),
            demand=parts.demand(settings, jobs),
            metrics=metrics.clusters[name],
            name=name,
            lock=lock,
            audit=audit,
        )
        if isinstance(loop.demand, ReportsServing):  # the same champion for every cluster: the process's
            loop.demand.report_to(metrics.served)
        parts.wire_xdp(loop, own, actuator, source=member.source)
        parts.wire_rca(loop, own, rca, source=member.source)
        loops.append(loop)
    return FleetLoop(loops, lock=lock, metrics=metrics)


def _history(path: Path | None, cluster: str, source: MetricSource) -> HistoryReader:
    from predictor.loop import FileHistory, SourceHistory
    from predictor.loop.fleet import ClusterRows

    if path is None:
        return SourceHistory(source)
    return ClusterRows(FileHistory(path).history, cluster, source=f"--history {path}")


def _workload(history: Path | None, source: MetricSource) -> WorkloadReader | None:
    """Jobs and GPU nodes from the cluster's kube-state-metrics where history comes from Prometheus."""
    from predictor.loop import SourceWorkload

    return None if history is not None else SourceWorkload(source)


def _jobs(pending: Path | None, history: Path | None, cluster: str, source: MetricSource) -> JobsReader | None:
    """Pending jobs (the demand model's input): the cluster's rows of ``--pending``, else its Prometheus."""
    from predictor.loop.demand import FileJobs, SourceJobs
    from predictor.loop.fleet import ClusterRows

    if pending is not None:
        return ClusterRows(FileJobs(pending).pending, cluster, source=f"--pending {pending}")
    return None if history is not None else SourceJobs(source)


def run_fleet_once(fleet: FleetLoop, settings: Settings, *, force: bool) -> None:
    """One cycle of every cluster and a table of what each did; exit 1 (one line) if a cluster's cycle failed."""
    try:
        report = fleet.run_once(force=force)
    finally:
        fleet.close()
    table = Table(title=f"fleet cycle ({settings.actuators.mode}), {len(fleet.loops)} clusters")
    for column in ("cluster", "cycle", "changes", "held", "result"):
        table.add_column(column, justify="right" if column == "changes" else "left")
    notes = []
    for loop in fleet.loops:
        name = str(loop.name)
        done = report.reports.get(name)
        if done is None:
            table.add_row(name, "", "", "", "failed")
            notes.append(f"{name}: failed: {report.failed.get(name, '')}")
            continue
        held = Counter(h.code for h in done.plan.held) if done.plan else Counter()
        result = (
            "standing by"
            if done.standby
            else "already done"
            if done.skipped
            else f"held: {done.hold[0]}"
            if done.hold
            else "ok"
        )
        table.add_row(
            name,
            done.cycle,
            str(len(done.plan.changes) if done.plan else 0),
            ", ".join(f"{code} {n}" for code, n in sorted(held.items())),
            result,
        )
        if done.standby or done.hold:
            notes.append(f"{name}: {done.standby or (done.hold[1] if done.hold else '')}")
    console.print(table)
    for note in notes:
        console.print(note, markup=False, highlight=False, soft_wrap=True)
    if report.failed:
        raise ActuatorError(
            f"{len(report.failed)} of {len(fleet.loops)} clusters failed their cycle: "
            f"{', '.join(sorted(report.failed))} (the others ran; see {settings.actuators.audit_log})"
        )
