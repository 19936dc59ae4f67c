"""The live loop's reaction time: pending GPUs per queue, and re-planning between interval slots.

Why: ``planner.pending_raise`` and ``planner.react_pending_gpus`` were measured in the replay, where the
simulator says what each queue has pending. A Volcano Queue's status does not, so the live cycle takes it
from the workload it already reads each cycle (kube-state-metrics pods, ``predictor.loop.inputs.SourceWorkload``):
Σ pods × GPUs per pod of the queue's pending gangs. The same snapshot gives the gang floors, so pending and
floors never disagree, and the cycle reads nothing more (``QUEUE_PENDING`` would be one more Prometheus
query per cycle and per poll, today read only by the demand model, as a history range). A failed or
absent read leaves pending *unknown* (``{}``), never 0.

Between slots ``run_forever`` waits, renewing the locks every ``renew_every_s``; with ``react_pending_gpus``
on (and ``planner.resource`` GPUs), the leader also reads queues and pending every ``loop.react_poll_s``, on
a schedule of its own, and feeds one ``PendingWatch``, and a queue that has waited beyond its deserved for
``react_after_s`` makes the loop re-plan at once, with every safety rule of a normal cycle (the planner's).
A failed read (any exception in it) is logged and counted; the loop keeps waiting. A loop on standby forgets
the waits it saw: what it sees once it leads again starts them afresh.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

import pandas as pd

from predictor.config import Settings
from predictor.errors import PredictorError
from predictor.loop.inputs import ClusterReader, WorkloadReader
from predictor.loop.metrics import LoopMetrics
from predictor.planner import QueueState, queues_from_list
from predictor.planner.react import PendingWatch
from predictor.planner.workload import GPU_RESOURCE, Workload

log = logging.getLogger(__name__)

__all__ = ["ReactWatch", "pending_gpus", "react_cycle", "with_pending"]


def pending_gpus(workload: Workload | None, resource: str) -> dict[str, float] | None:
    """GPUs each queue's pending gangs ask for; a queue the workload lists with none pending gets 0.

    ``None`` (unknown) without a workload, or for a resource other than GPUs (the workload counts GPUs only).
    """
    if workload is None or resource != GPU_RESOURCE:
        return None
    pending: dict[str, float] = {}
    for job in workload.jobs:
        pending[job.queue] = pending.get(job.queue, 0.0) + (float(job.gpus) if job.phase == "pending" else 0.0)
    return pending


def with_pending(queues: Sequence[QueueState], workload: Workload | None, resource: str) -> list[QueueState]:
    """``queues`` with ``pending`` filled from ``workload`` where it lists them; unknown stays ``{}``."""
    pending = pending_gpus(workload, resource)
    if pending is None:
        return list(queues)
    return [replace(q, pending={resource: pending[q.name]}) if q.name in pending else q for q in queues]


def react_cycle(slot: str, now: pd.Timestamp) -> str:
    """A re-plan's cycle id: never an interval slot, so the slot's own cycle still runs once (``cycle_slot``)."""
    return f"{slot}+react-{int(now.timestamp())}"


class ReactWatch:
    """One ``PendingWatch`` fed from the live queues every ``loop.react_poll_s`` between interval slots."""

    def __init__(
        self, settings: Settings, cluster: ClusterReader, workload: WorkloadReader | None, metrics: LoopMetrics
    ) -> None:
        self.settings, self.cluster, self.workload, self.metrics = settings, cluster, workload, metrics
        self.watch = PendingWatch(settings.planner)
        self.last_poll_s: float | None = None
        self.failing = False  # the last poll failed: the next failure is not logged again, a success is
        p = settings.planner
        if p.react_pending_gpus > 0 and workload is None:
            log.warning(
                "planner.react_pending_gpus is set but the loop reads no workload (--history): pending "
                "GPUs are unknown, so it never re-plans between slots"
            )
        elif p.react_pending_gpus > 0 and p.resource != GPU_RESOURCE:
            log.warning(
                "planner.react_pending_gpus is set but planner.resource is %s: the workload counts "
                "pending %s only, so the loop never re-plans between slots",
                p.resource,
                GPU_RESOURCE,
            )

    @property
    def enabled(self) -> bool:
        """Whether anything is read between slots: the rule is on and pending can be known (GPUs, a workload)."""
        p = self.settings.planner
        return p.react_pending_gpus > 0 and self.workload is not None and p.resource == GPU_RESOURCE

    @property
    def poll_s(self) -> float:
        return self.settings.loop.react_poll_s

    def poll(self, now: pd.Timestamp) -> list[str]:
        """The queues that trigger a re-plan at ``now`` (``[]`` on a failed read); ``wait_and_watch`` says when.

        A failed read, or pending unknown, feeds the watch nothing: no queue's waiting clock restarts on a
        read that says nothing about it. Any exception in the read is a failed read (counted in
        ``react_read_failures``, logged once per outage; an unexpected one with its traceback); only a
        re-plan's own failure is the caller's.
        """
        now_s = now.timestamp()
        if self.last_poll_s is not None and now_s < self.last_poll_s:
            self._stepped_back(self.last_poll_s - now_s)
        if not self.enabled:
            return []
        self.last_poll_s = now_s
        assert self.workload is not None
        p = self.settings.planner
        try:
            queues = queues_from_list(
                self.cluster.queue_objects(),
                source="live queues",
                allocated_milli=p.allocated_milli_units,
                manage=self.settings.actuators.queues.manage,
            )
            workload = self.workload.workload(now)
        except (PredictorError, OSError) as exc:
            self._failed(f"cannot read queues or pending GPUs: {exc}")
            return []
        except Exception as exc:  # unexpected data (or a bug) in a read: a failed read too, with its traceback
            self._failed(f"cannot read queues or pending GPUs: {type(exc).__name__}: {exc}", exc)
            return []
        if pending_gpus(workload, p.resource) is None:
            self._failed("pending GPUs unknown (no workload from kube-state-metrics)")
            return []
        if self.failing:
            log.info("react watch: queues and pending GPUs read again")
        self.failing = False
        return self.watch.observe(with_pending(queues, workload, p.resource), now_s)

    def reason(self, queues: Sequence[str]) -> str:
        p = self.settings.planner
        return (
            f"re-plan between slots: {', '.join(queues)} waited with at least {p.react_pending_gpus:g} GPUs "
            f"pending and allocated + pending above deserved for {p.react_after_s:g} s "
            "(planner.react_pending_gpus)"
        )

    def standby(self) -> None:
        """This loop stands by (another holds the lock or the Lease): forget every queue's wait and the last
        poll, so a loop that leads again waits ``react_after_s`` from what it sees then, not from before."""
        self.last_poll_s = None
        self.watch.since.clear()

    def _stepped_back(self, by_s: float) -> None:
        """The wall clock went back ``by_s`` (NTP): poll now, and keep each queue's wait as long as it was."""
        log.info("react watch: the clock stepped back %.0f s", by_s)
        self.last_poll_s = None
        self.watch.since = {queue: since - by_s for queue, since in self.watch.since.items()}

    def _failed(self, why: str, exc: Exception | None = None) -> None:
        self.metrics.react_read_failures.inc()
        if not self.failing:  # once per outage, not every poll (the counter counts every one)
            log.warning("react watch: %s; polling on", why.splitlines()[0], exc_info=exc)
        self.failing = True
