"""When to plan again between hourly cycles (``planner.react_pending_gpus``): what a controller watching
pending PodGroups would do.

Why: the loop plans once an hour, and a burst that arrives a minute after a cycle waits up to an hour before
any quota moves for it; static elastic quotas react within Volcano's own session (seconds). A queue that has
had at least ``react_pending_gpus`` GPUs pending, and asks for more than its deserved (allocated + pending >
deserved: only then can a raise help it), for ``react_after_s`` triggers a re-plan from the same forecast.
The cooldown still holds every queue's cuts (``plan.plan_queues``); with ``planner.pending_raise`` a raise
backed by pending gangs passes it. After a trigger the queue's clock restarts, so one queue re-plans at most
once per ``react_after_s``.
"""

from __future__ import annotations

from collections.abc import Sequence

from predictor.planner.settings import PROTECTED_QUEUES, PlannerSettings
from predictor.planner.state import QueueState

__all__ = ["PendingWatch"]


class PendingWatch:
    """Per queue, since when it has waited beyond its deserved; ``observe`` says which queues trigger."""

    def __init__(self, settings: PlannerSettings) -> None:
        self.settings = settings
        self.since: dict[str, float] = {}

    def waiting(self, queue: QueueState) -> bool:
        """At least ``react_pending_gpus`` pending, and allocated + pending above deserved."""
        r = self.settings.resource
        pending = queue.pending.get(r, 0.0)
        deserved = queue.deserved.get(r)
        return (
            queue.managed
            and queue.name not in PROTECTED_QUEUES
            and pending > 0
            and pending >= self.settings.react_pending_gpus
            and (deserved is None or queue.allocated.get(r, 0.0) + pending > deserved)
        )

    def observe(self, queues: Sequence[QueueState], now_s: float) -> list[str]:
        """The queues that have been waiting for ``react_after_s`` at ``now_s`` (their clocks restart)."""
        if self.settings.react_pending_gpus <= 0:
            return []
        fired = []
        for queue in queues:
            if not self.waiting(queue):
                self.since.pop(queue.name, None)
                continue
            first = self.since.setdefault(queue.name, now_s)
            if now_s - first >= self.settings.react_after_s:
                fired.append(queue.name)
                self.since[queue.name] = now_s
        return sorted(fired)
