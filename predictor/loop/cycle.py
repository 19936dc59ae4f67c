"""One scheduling-loop cycle: read → forecast → plan → check → (apply) → audit, and nothing half-done.

Everything that can fail before a write (queues, history, model, invariants) is done first; a failure
there holds every queue with the reason and writes nothing to the cluster. Planning itself (stale hold,
targets, safety policy, invariant gate) is ``predictor.planner.plan_cycle``, the call ``predictor plan``
makes offline. Every decision is appended to the audit log — ``intent`` before a patch, the outcome
after — so a loop killed mid-apply finds, on restart, exactly which patches were in flight and checks
them against the live queues instead of guessing (each queue is one merge patch, so none can be
half-patched). Cooldowns, done cycle slots and the stabilisation memory all survive a restart. Every
time the cycle uses (audit records, holds, band gauges, last success) is the injected clock's ``now``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pandas as pd

from predictor.actuators import Change
from predictor.actuators.audit import AuditLog, AuditRecord, read_state, write_state
from predictor.actuators.recommend import apply_annotations
from predictor.actuators.volcano import Outcome, PlanDirMemo, write_plan_dir
from predictor.config import Settings
from predictor.errors import (
    ActuatorError,
    InputError,
    PredictorError,
)
from predictor.loop.demand import DemandReader
from predictor.loop.inputs import ClusterReader, Forecaster, HistoryReader, ReportsServing, WorkloadReader
from predictor.loop.leader import FileLock, Leader
from predictor.loop.metrics import LoopMetrics
from predictor.loop.modes import RECOMMEND_OUTCOMES, annotation_changes, queue_modes, to_apply
from predictor.loop.notify import Notifier, notify_cycle
from predictor.loop.observe import observe_cycle
from predictor.loop.outcome import CycleReport
from predictor.loop.planstep import Inputs, plan_step, read_inputs, read_workload
from predictor.loop.react import ReactWatch, react_cycle
from predictor.loop.recovery import settle_intents
from predictor.loop.seams import QueueActuator
from predictor.loop.waiting import wait_and_watch, wait_for_next_cycle
from predictor.loop.xdp import XdpLoop
from predictor.planner import (
    FieldChange,
    QueuePlan,
)
from predictor.planner.workload import Workload

if TYPE_CHECKING:  # the root-cause model and its features load only where diagnosis is wired
    from predictor.loop.rca import LoopRca

log = logging.getLogger(__name__)

__all__ = ["CycleReport", "Loop", "cycle_slot", "wait_for_next_cycle"]


def cycle_slot(now: pd.Timestamp, interval_s: float) -> str:
    """The id of the interval slot ``now`` falls in: a restarted loop never runs one slot twice."""
    start = math.floor(now.timestamp() / interval_s) * interval_s
    return pd.Timestamp(start, unit="s", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


class Loop:
    """The scheduling loop, wired from injected readers, forecaster and actuator."""

    def __init__(
        self,
        settings: Settings,
        *,
        cluster: ClusterReader,
        history: HistoryReader,
        forecaster: Forecaster,
        actuator: QueueActuator | None = None,
        metrics: LoopMetrics | None = None,
        clock: Callable[[], pd.Timestamp] | None = None,
        lease: Leader | None = None,
        workload: WorkloadReader | None = None,
        demand: DemandReader | None = None,
        xdp: XdpLoop | None = None,
        name: str | None = None,
        lock: Leader | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        """``name``: the cluster of a fleet this loop plans (``None``: the single unnamed cluster). A fleet
        (``predictor.loop.fleet``) hands its loops one shared audit log and one local ``lock``."""
        self.settings, self.cluster, self.history, self.forecaster = settings, cluster, history, forecaster
        self.workload = workload  # jobs and GPU nodes (gang floors, pools, fragmentation); None: unknown
        self.demand = demand  # None: no demand model wired; queues are sized by the forecast alone
        self.models: dict[str, str] = {}  # the cycle's served model URIs, cited by its change records
        self.actuator, self.name = actuator, name
        self.mode = settings.actuators.mode  # how queue writes are sent: plan | server-dry-run | apply
        if settings.actuators.writes_cluster and actuator is None:
            raise InputError(
                f"actuators.queues.writes {self.mode} / actuators.xdp.mode {settings.actuators.xdp.mode} "
                "need a Kubernetes connection"
            )
        self.audit = audit or AuditLog(settings.actuators.audit_log)
        # Stabilisation memory and the capacity reference are per cluster: one state file each.
        log = settings.actuators.audit_log
        self.state_path = log.with_name(log.name + (f".{name}" if name else "") + ".state.json")
        self.metrics = metrics or LoopMetrics(
            ready_within_s=settings.loop.ready_within_s, live_within_s=settings.loop.live_within_s
        )
        # the served models (URI, age, promotion, stale, failed loads) on /metrics, against their maximum age
        self.metrics.max_model_age(settings.mlflow.max_champion_age_days * 86400)
        for served in (forecaster, demand):
            if isinstance(served, ReportsServing):
                served.report_to(self.metrics)
        self.clock = clock or (lambda: pd.Timestamp.now(tz="UTC"))
        # One loop at a time (predictor.loop.leader): the local lock always, the Lease where one is wired.
        self.leaders: list[Leader] = [lock or FileLock(self.audit.path.with_name(self.audit.path.name + ".lock"))]
        if lease is not None:
            self.leaders.append(lease)
        self._forever = False  # run_forever keeps the local lock between cycles; run_once alone does not
        self.xdp = xdp  # the XDP agents' inputs (predictor.loop.xdp), published each cycle when wired
        self.rca: LoopRca | None = None  # root-cause diagnosis (predictor.loop.rca), when loop.diagnose is wired
        self._plan_files = PlanDirMemo()  # unchanged plan files are neither rendered nor read again
        self.react = ReactWatch(settings, cluster, workload, self.metrics)  # planner.react_pending_gpus
        self.notifier = Notifier(settings.actuators.notify, name)  # the webhook, where one is configured

    def lead(self, now: pd.Timestamp) -> str:
        """Take or renew every lock; ``""`` when this instance may act, else why it stands by."""
        for leader in self.leaders:
            why = leader.acquire(now)
            if why:
                self.react.standby()  # another loop decides meanwhile: what this one saw waiting goes stale
                return why
        return ""

    def still_leading(self) -> str:
        """``""`` while every lock taken by ``lead`` is still held (checked between the patches of one apply)."""
        now = self.clock()
        for leader in self.leaders:
            why = leader.check(now)
            if why:
                return why
        return ""

    def close(self) -> None:
        """Give up the Lease and the lock (a successor need not wait for the Lease to expire)."""
        for leader in reversed(self.leaders):
            leader.release()

    # -- audit helpers -------------------------------------------------------------------------------
    def _record(
        self,
        now: pd.Timestamp,
        cycle: str,
        queue: str,
        outcome: str,
        reason: str,
        *,
        code: str = "",
        change: FieldChange | None = None,
    ) -> AuditRecord:
        return AuditRecord(
            timestamp=now.isoformat(),
            cycle=cycle,
            queue=queue,
            field=change.field if change else None,
            resource=change.resource if change else None,
            before=change.before if change else None,
            after=change.after if change else None,
            reason=reason,
            mode=self.mode,
            outcome=outcome,
            code=code or (change.code if change else ""),
            unix=now.timestamp(),
            models=dict(self.models) if self.models and (change is not None or outcome == "cycle-done") else None,
            cluster=self.name,
        )

    def recover(self, now: pd.Timestamp) -> list[AuditRecord]:
        """Settle patches cut off by a crash: applied if the live queue shows them, else abandoned."""
        pending = self.audit.pending_intents(self.name)
        if not pending:
            return []
        records = settle_intents(pending, self.cluster.queue_objects(), now, cluster=self.name)
        self.audit.append(records)
        return records

    # -- the cycle -----------------------------------------------------------------------------------
    def run_once(self, *, force: bool = False) -> CycleReport:
        """One cycle; outside ``run_forever`` the local lock is given up after it (the next process may run)."""
        try:
            return self.run_cycle(force=force)
        finally:
            if not self._forever:  # one cycle: the audit log is free again for the next process
                self.leaders[0].release()

    def run_cycle(self, *, force: bool = False) -> CycleReport:
        """One cycle, keeping the locks (``run_once``, ``run_forever`` and a fleet's cycle call this)."""
        started = time.perf_counter()
        now = self.clock()
        cycle = cycle_slot(now, self.settings.loop.interval_s)
        report = CycleReport(cycle=cycle, mode=self.mode)
        try:
            report.standby = self.lead(now)
            if report.standby:
                self.metrics.cycles.labels(result="standby").inc()
                return report
            return self._run_locked(now, cycle, report, force, started)
        finally:
            self.metrics.completed()

    def run_react(self, queues: list[str]) -> CycleReport:
        """A re-plan between slots for ``queues`` (``predictor.loop.react``), with its own cycle id. Its inputs
        are a slot's: the registered model is served (updated on fresh history, never refitted), so this costs
        a history read and a prediction. Cooldowns, dead band and step are the planner's, as in every cycle."""
        started = time.perf_counter()
        now = self.clock()
        cycle = react_cycle(cycle_slot(now, self.settings.loop.interval_s), now)
        report = CycleReport(cycle=cycle, mode=self.mode)
        try:
            report.standby = self.lead(now)
            if report.standby:
                self.metrics.cycles.labels(result="standby").inc()
                return report
            return self._run_locked(now, cycle, report, False, started, react=self.react.reason(queues))
        finally:
            self.metrics.completed()

    def _run_locked(
        self, now: pd.Timestamp, cycle: str, report: CycleReport, force: bool, started: float, *, react: str = ""
    ) -> CycleReport:
        """``react``: why this is a re-plan between slots (audited and counted only if its id is not done)."""
        # Read after taking the lock: a loop that just finished this slot has written its cycle-done.
        if not force and cycle in self.audit.done_cycles(self.name):
            report.skipped = True
            return report
        if react:
            self.audit.append([self._record(now, cycle, "*", "react", react, code="react")])
            self.metrics.react_cycles.inc()
        try:
            report.recovered = self.recover(now)
            for record in report.recovered:
                self.metrics.changes.labels(mode=record.mode, outcome=record.outcome).inc()
            self._cycle(now, cycle, report, replan=bool(react))
        except PredictorError:
            self.metrics.cycles.labels(result="error").inc()
            raise
        self.metrics.last_cycle_seconds.set(time.perf_counter() - started)
        return report

    def _inputs(self, now: pd.Timestamp) -> Inputs:
        """The forecast, model versions, a hold of everything, and per-queue holds (``planstep.read_inputs``)."""
        return read_inputs(self.settings, now, self.history, self.forecaster, self.demand)

    def _cycle(self, now: pd.Timestamp, cycle: str, report: CycleReport, *, replan: bool = False) -> None:
        if self.xdp is not None and not replan:  # independent of the queue plan (a re-plan is about queues only)
            self._drive_xdp(now, cycle)
        inputs = self._inputs(now)
        if self.rca is not None and not replan:  # findings audited; queues stalled by a fault held (rca_fault)
            self.rca.hold(
                inputs.held, self.audit, now, cycle, self.mode, history=inputs.history, forecast=inputs.forecast
            )
        forecast, versions = inputs.forecast, inputs.versions
        self.models = inputs.models()
        state = read_state(self.state_path)
        step = plan_step(
            self.settings,
            now,
            inputs=inputs,
            cluster=self.cluster,
            workload=self.workload,
            state=state,
            last_changed=self.audit.last_changed(self.mode, self.name),
        )
        if step.plan is None or step.capacity is None:
            report.hold = step.hold or ("source_down", "cannot read queues or nodes")
            self.audit.append([self._record(now, cycle, "*", "held", report.hold[1], code="source_down")])
            self.metrics.held.labels(reason="source_down").inc()
            self.metrics.cycles.labels(result="held").inc()
            self._notify(cycle, report)
            return
        plan, hold, objects, checked, workload = step.plan, step.hold, step.objects, step.capacity, step.workload
        report.plan, report.hold = plan, hold
        self.metrics.capacity(checked.next_reference, held=bool(hold and hold[0] == "capacity_drop"))
        report.modes = queue_modes(plan, objects, self.settings.actuators.queues.mode)
        write_plan_dir(plan, objects, self.settings.actuators.plan_dir, models=self.models, memo=self._plan_files)
        records = [self._record(now, cycle, h.queue, "held", h.reason, code=h.code) for h in plan.held]
        if self.mode == "plan":
            records += [self._record(now, cycle, c.queue, "planned", c.reason, change=c) for c in plan.changes]
            self.audit.append(records)
            self.metrics.changes.labels(mode=self.mode, outcome="planned").inc(len(plan.changes))
        else:
            self.audit.append(records)
            report.outcomes = self._apply(now, cycle, plan, objects, report)
        write_state(self.state_path, {"memory": plan.memory.to_json(), "capacity": checked.state})
        self._observe(
            now, plan, forecast, {**versions, **(inputs.demand.versions if inputs.demand else {})}, hold, workload
        )
        self.audit.append(
            [self._record(now, cycle, "*", "cycle-done", hold[1] if hold else "ok", code=hold[0] if hold else "")]
        )
        self._notify(cycle, report)

    def _notify(self, cycle: str, report: CycleReport) -> None:
        notify_cycle(self.notifier, self.settings.actuators.notify.hold_codes, cycle, report)

    def _drive_xdp(self, now: pd.Timestamp, cycle: str) -> None:
        assert self.xdp is not None
        done = self.xdp.run(now, mode=self.settings.actuators.xdp.mode, plan_dir=self.settings.actuators.plan_dir)
        profiles = ", ".join(f"{n.node}: {n.profile.name} {n.profile.weights}" for n in done.nodes[:20])
        more = f" and {len(done.nodes) - 20} more" if len(done.nodes) > 20 else ""
        skipped = f"; {len(done.skipped)} nodes without inputs" if done.skipped else ""
        reason = done.error or (
            f"XDP inputs for {len(done.nodes)} nodes from {done.forecaster}{skipped}"
            f"{'; ' + done.published if done.published else ''}: {profiles}{more}"
        )
        self.audit.append([self._record(now, cycle, "*", "xdp", reason, code="xdp_failed" if done.error else "xdp")])

    def _apply(
        self, now: pd.Timestamp, cycle: str, plan: QueuePlan, objects: list[dict[str, Any]], report: CycleReport
    ) -> list[Outcome]:
        """Resize apply-mode queues and annotate recommend-mode ones, holding the Lease; both audited."""
        assert self.actuator is not None
        resize = to_apply(plan, report.modes)
        notes = annotation_changes(
            plan,
            objects,
            report.modes,
            models=self.models,
            resource=self.settings.planner.resource,
            at=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
        lost = self.lead(self.clock()) if resize.changes or notes else ""
        if lost:  # the cycle outlived the Lease and another loop took it: it decides now, not this one
            raise ActuatorError(f"lost the leader lock before applying, nothing applied: {lost}")
        by_queue: dict[str, list[FieldChange]] = {}
        for c in plan.changes:
            by_queue.setdefault(c.queue, []).append(c)

        def intent(change: Change) -> None:
            queue = change.target
            self.audit.append([self._record(now, cycle, queue, "intent", c.reason, change=c) for c in by_queue[queue]])

        parents = {q.name: q.parent for q in plan.desired.values()}
        outcomes = (
            self.actuator.apply_all(
                self.actuator.plan(resize),
                dry_run=self.mode != "apply",
                parents=parents,
                on_intent=intent,
                still_leading=self.still_leading,
            )
            if resize.changes
            else []
        )
        records = []
        for o in outcomes:
            for c in by_queue.get(o.change.target, []):
                records.append(self._record(now, cycle, c.queue, o.outcome, o.message or c.reason, change=c))
            self.metrics.changes.labels(mode=self.mode, outcome=o.outcome).inc(len(by_queue.get(o.change.target, [])))
        # Annotations are writes too: a loop that lost its Lease during the resize leaves them to the new leader.
        lost = self.still_leading() if notes else ""
        report.recommended = [] if lost else apply_annotations(self.actuator, notes, dry_run=self.mode != "apply")
        for o in report.recommended:
            outcome = RECOMMEND_OUTCOMES.get(o.outcome, o.outcome)
            why = o.message or o.change.reason
            # An apply-mode queue's patch only clears an old recommendation: its changes are audited above.
            mine = by_queue.get(o.change.target, []) if report.modes.get(o.change.target) == "recommend" else []
            records += [self._record(now, cycle, c.queue, outcome, why, change=c) for c in mine]
            if not mine:
                records.append(self._record(now, cycle, o.change.target, outcome, why, code="recommend"))
            self.metrics.changes.labels(mode=self.mode, outcome=outcome).inc(max(1, len(mine)))
        self.audit.append(records)
        return outcomes

    def _workload(self, now: pd.Timestamp) -> Workload | None:
        """This cycle's jobs and GPU nodes (``planstep.read_workload``): a failed read is unknown, never empty."""
        return read_workload(self.workload, now)

    def _observe(
        self,
        now: pd.Timestamp,
        plan: QueuePlan,
        forecast: pd.DataFrame | None,
        versions: dict[str, str],
        hold: tuple[str, str] | None,
        workload: Workload | None = None,
    ) -> None:
        observe_cycle(self.metrics, self.settings.planner.resource, now, plan, forecast, versions, hold, workload)

    def fail(self, exc: Exception) -> str:
        """Record a cycle that raised (outcome ``failed``, code ``error``); returns its one-line reason."""
        now = self.clock()
        why = str(exc) if isinstance(exc, PredictorError) else f"{type(exc).__name__}: {exc}"
        why = why.splitlines()[0] if why else type(exc).__name__
        self.audit.append(
            [self._record(now, cycle_slot(now, self.settings.loop.interval_s), "*", "failed", why, code="error")]
        )
        return why

    def run_forever(
        self,
        stop: Callable[[], bool],
        sleep: Callable[[float], object] = time.sleep,
        renew_every_s: float | None = None,
    ) -> None:
        """Cycle every ``loop.interval_s`` until ``stop()``; an error in one cycle never ends the loop.

        Between cycles the wait is cut into steps of at most ``renew_every_s`` that renew the locks, so a
        Lease shorter than the interval stays held; a standby instance tries to take it at each step. With
        ``planner.react_pending_gpus`` on, the leader also polls every ``loop.react_poll_s`` (its own schedule)
        and re-plans between slots when a queue has waited long enough (``predictor.loop.react``).
        """
        self._forever = True
        try:
            while not stop():
                try:
                    self.run_once()
                except Exception as exc:  # one bad cycle (even a bug) must not end the loop
                    self.fail(exc)
                if self.react.enabled:
                    wait_and_watch(
                        self.settings.loop.interval_s,
                        self.clock,
                        stop,
                        sleep,
                        renew_every_s=renew_every_s or self.settings.loop.lease_renew_s,
                        poll_s=self.react.poll_s,
                        renew=lambda: self.lead(self.clock()),
                        watch=self.watch_pending,
                    )
                else:
                    wait_for_next_cycle(
                        self.settings.loop.interval_s,
                        self.clock,
                        stop,
                        sleep,
                        renew_every_s or self.settings.loop.lease_renew_s,
                        renew=lambda: self.lead(self.clock()),
                    )
        finally:
            self.close()

    def watch_pending(self) -> None:
        """Between slots, as the leader: poll queues and pending, re-plan now if a queue triggers; never raises."""
        try:
            fired = self.react.poll(self.clock())
            if fired:
                self.run_react(fired)
        except Exception as exc:  # a bad re-plan (even a bug) is recorded like a bad cycle; the wait goes on
            self.fail(exc)
