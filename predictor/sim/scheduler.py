"""An event-driven, Volcano-like gang scheduler with a step-wise API for closed-loop quota experiments.

Jobs arrive and finish as events; a scheduling pass (one Volcano session) runs at most once per
``period_s`` whenever something changed, and at the first ``period_s`` boundary at least ``period_s`` after
a pass that evicted (Volcano opens a session every period; a session here gives a queue one eviction attempt,
for its first job that cannot be placed, so a burst of small gangs reclaims one gang per queue per period).
Within a pass queues take turns by lowest share (allocated/deserved, the capacity plugin's order), each
queue serves its jobs FIFO, a job is admitted
only whole (gang) and only under its queue's real capability (capability, and never into other queues'
guarantees), and GPUs are placed binpack (fullest node that fits) so fragmentation behaves as in a real
cluster. Inside a queue, higher priorityClass goes first. With ``VolcanoSettings(reclaim=True,
preempt=True)`` a gang that cannot be placed may evict others (rules in ``volcano.py``, which pods on which
node in ``evict.py``); an evicted job keeps the work up to its last checkpoint and pays a restart overhead on
its next attempt. ``run_until`` +
``set_quotas`` let a planner change quotas hour by hour and see the effect, which is what a closed-loop replay
needs.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from predictor.errors import InputError
from predictor.sim.attempts import AttemptLog, SchedulerResult
from predictor.sim.cluster import ClusterSpec, QueueSpec, Quota, check_queues
from predictor.sim.evict import Evictions, Victim, gang_tasks, plan_evictions
from predictor.sim.series import epoch_s
from predictor.sim.volcano import VolcanoSettings, kept_work

__all__ = ["Scheduler", "SchedulerResult"]


class Scheduler:
    """Replays ``jobs`` (normalised job table) on ``cluster`` with ``queues`` from ``start``.

    Step-wise use: ``run_until(t)``, then ``set_quota``/``set_node_ready`` at that time, repeat;
    ``result()`` at the end. ``reserve_after_s``: a job at the head of its queue that has waited this long
    blocks the jobs behind it (FIFO), so big gangs are not starved forever by small ones.
    """

    def __init__(
        self,
        jobs: pd.DataFrame,
        cluster: ClusterSpec,
        queues: Sequence[QueueSpec],
        *,
        start: pd.Timestamp,
        period_s: int = 10,
        reserve_after_s: float = 6 * 3600.0,
        max_scan: int = 64,
        volcano: VolcanoSettings | None = None,
    ) -> None:
        check_queues(queues, list(jobs["queue"].unique()))
        if period_s < 1:
            raise InputError(f"scheduling period must be >= 1 s, got {period_s}")
        self.cluster = cluster
        self.queue_names = [q.name for q in queues]
        self._qidx = {name: i for i, name in enumerate(self.queue_names)}
        self.deserved = np.array([q.deserved for q in queues], dtype=float)
        self.capability = np.array([q.capability for q in queues], dtype=float)
        self.guarantee = np.array([q.guarantee for q in queues], dtype=float)
        self._reclaimable = np.array([q.reclaimable for q in queues], dtype=bool)
        self._q_priority = np.array([q.priority for q in queues], dtype=np.int64)
        self.volcano = volcano or VolcanoSettings()
        fits = jobs["num_gpus"].to_numpy() <= cluster.n_gpus
        self.dropped_jobs = int((~fits).sum())
        self.jobs = jobs[fits].reset_index(drop=True)
        self._submit = epoch_s(self.jobs["submit"])
        self._queue = self.jobs["queue"].map(self._qidx).to_numpy().astype(np.int64)
        self._gpus = self.jobs["num_gpus"].to_numpy().astype(np.int64)
        self._dur = np.maximum(self.jobs["duration_s"].to_numpy(), 1.0)
        n_jobs = len(self.jobs)
        self._prio = self._column("priority", 0).astype(np.int64)
        self._ckpt = self._column("checkpoint_s", self.volcano.checkpoint_s)
        self._restart = self._column("restart_s", self.volcano.restart_s)
        self._preemptable = self._column("preemptable", 1.0).astype(bool)  # volcano.sh/preemptable
        self._lowest_priority = float(self._prio.min()) if n_jobs else 0.0  # nobody below it can be preempted
        self._done = np.zeros(n_jobs)  # seconds of work kept from earlier attempts
        self._tries = np.zeros(n_jobs, dtype=np.int64)
        self.period_s = int(period_s)
        self.reserve_after_s = reserve_after_s
        self.max_scan = max_scan
        self.now = int(pd.Timestamp(start).timestamp())
        g = cluster.gpus_per_node
        self._g = g
        self._node_free = np.full(cluster.n_nodes, g, dtype=np.int64)
        self._node_ready = np.ones(cluster.n_nodes, dtype=bool)
        self._owner = np.full(cluster.n_gpus, -1, dtype=np.int64)  # attempt id per GPU
        self._next_job = 0
        nq = len(self.queue_names)
        # (-priority, submit, job) sorted: priorityClass first, then FIFO (Volcano's job order)
        self._pending: list[list[tuple[int, int, int]]] = [[] for _ in range(nq)]
        self._running: list[set[int]] = [set() for _ in range(nq)]  # active attempts per queue
        self._alloc = np.zeros(nq, dtype=np.int64)
        self._pend_gpus = np.zeros(nq, dtype=np.int64)
        self._running_jobs = np.zeros(nq, dtype=np.int64)
        self._heap: list[tuple[int, int]] = []
        self._log = AttemptLog()
        self._attempt_no: dict[int, int] = {}
        # records
        self._t: list[int] = []
        self._rec_alloc: list[np.ndarray] = []
        self._rec_pg: list[np.ndarray] = []
        self._rec_pj: list[np.ndarray] = []
        self._rec_rj: list[np.ndarray] = []
        self._rec_ready: list[int] = []
        self._q_t: list[int] = [self.now]
        self._q_des: list[np.ndarray] = [self.deserved.copy()]
        self._q_cap: list[np.ndarray] = [self.capability.copy()]
        self._changed = False
        # A session that evicted is followed by another about a period later: Volcano opens a session every
        # --schedule-period (1 s by default) whatever happens, and here a session gives a queue one eviction
        # attempt, so without the follow-up a burst waiting on reclaim got one more eviction only at the next
        # arrival or finish anywhere in the cluster (an hour apart, on a full cluster of long services).
        self._next_session = math.inf

    def _column(self, name: str, default: float) -> np.ndarray:
        """An optional per-job column (priority, checkpoint_s, restart_s, preemptable), or ``default`` for every job."""
        if name in self.jobs.columns:
            return self.jobs[name].fillna(default).to_numpy().astype(float)
        return np.full(len(self.jobs), default, dtype=float)

    # ----------------------------------------------------------------- external actions
    def set_quota(
        self, queue: str, deserved: float | None = None, capability: float | None = None, guarantee: float | None = None
    ) -> None:
        """Change a queue's quota now (applies from the next pass, as Volcano's next session)."""
        self.set_quotas({queue: Quota(deserved, capability, guarantee)})

    def set_quotas(self, quotas: Mapping[str, Quota]) -> None:
        """Change several queues' quotas at once, then one pass. A planner writes one cycle's queues within
        a second, between two of Volcano's sessions, so the next session acts on the whole plan; a pass after
        each queue would reclaim for a half-applied plan (one queue raised, the queue it takes from not yet
        cut) at every cycle. A session that recomputes every queue's share (Volcano's proportion plugin) writes
        them this way too. Nothing changes if a queue is unknown."""
        unknown = sorted(set(quotas) - set(self._qidx))
        if unknown:
            raise InputError(f"unknown queue {unknown[0]!r} (known: {', '.join(self.queue_names)})")
        for queue, quota in quotas.items():
            i = self._qidx[queue]
            if quota.deserved is not None:
                self.deserved[i] = quota.deserved
            if quota.capability is not None:
                self.capability[i] = quota.capability
            if quota.guarantee is not None:
                self.guarantee[i] = quota.guarantee
        self._q_t.append(self.now)
        self._q_des.append(self.deserved.copy())
        self._q_cap.append(self.capability.copy())
        self._changed = True
        self._schedule()

    def set_node_ready(self, node: int, ready: bool) -> None:
        """Mark a node (not) ready; going not-ready kills its gangs and requeues them (pods evicted)."""
        if ready == self._node_ready[node]:
            return
        self._node_ready[node] = ready
        if not ready:
            lo, hi = node * self._g, (node + 1) * self._g
            for attempt in sorted({int(a) for a in self._owner[lo:hi] if a >= 0}):
                self._finish(attempt, killed=True, cause="node")
        self._changed = True
        self._schedule()

    @property
    def allocated(self) -> dict[str, int]:
        return {name: int(self._alloc[i]) for i, name in enumerate(self.queue_names)}

    def free_per_node(self) -> np.ndarray:
        """Free GPUs per node now (0 on a node that is not ready)."""
        return np.where(self._node_ready, self._node_free, 0)

    @property
    def pending(self) -> dict[str, int]:
        return {name: int(self._pend_gpus[i]) for i, name in enumerate(self.queue_names)}

    # ----------------------------------------------------------------- event loop
    def run_until(self, t: pd.Timestamp | int) -> None:
        """Advance simulated time to ``t`` (epoch seconds or a timestamp), scheduling on the way."""
        t_end = int(pd.Timestamp(t).timestamp()) if not isinstance(t, int | np.integer) else int(t)
        n = len(self._submit)
        while True:
            next_arrival = self._submit[self._next_job] if self._next_job < n else math.inf
            next_end = self._heap[0][0] if self._heap else math.inf
            event = min(next_arrival, next_end, self._next_session)
            if event > t_end:
                break
            event = max(int(event), self.now)
            pass_time = min(-(-event // self.period_s) * self.period_s, t_end)
            self.now = max(pass_time, event)
            while self._heap and self._heap[0][0] <= self.now:
                end, attempt = heapq.heappop(self._heap)
                if self._log.active[attempt] and self._log.end[attempt] == end:
                    self._finish(attempt, killed=False, cause="done")
            while self._next_job < n and self._submit[self._next_job] <= self.now:
                self._enqueue(self._next_job)
                self._next_job += 1
            self._schedule()
        self.now = max(self.now, t_end)

    def _enqueue(self, job: int) -> None:
        q = int(self._queue[job])
        bisect.insort(self._pending[q], (-int(self._prio[job]), int(self._submit[job]), job))
        self._pend_gpus[q] += self._gpus[job]
        self._changed = True

    def _finish(self, attempt: int, *, killed: bool, cause: str) -> None:
        job = self._log.job[attempt]
        q = int(self._queue[job])
        gpus = self._log.gpus[attempt]
        elapsed = float(self.now - self._log.start[attempt])
        overhead = min(elapsed, self._log.overhead[attempt])
        work = elapsed - overhead
        kept = kept_work(work, float(self._ckpt[job]), finished=not killed)
        self._done[job] += kept if killed else 0.0
        self._log.kept[attempt], self._log.lost[attempt], self._log.cause[attempt] = kept, work - kept, cause
        self._running[q].discard(attempt)
        self._owner[gpus] = -1
        np.add.at(self._node_free, gpus // self._g, 1)
        self._alloc[q] -= len(gpus)
        self._running_jobs[q] -= 1
        self._log.active[attempt] = False
        if killed:
            self._log.end[attempt] = self.now
            self._log.killed[attempt] = True
            self._enqueue(job)
        self._changed = True

    # ----------------------------------------------------------------- one session
    def _schedule(self) -> None:
        nq = len(self.queue_names)
        self._next_session = math.inf
        if not self._changed:
            return
        self._changed = False
        ready_total = int(self._node_ready.sum()) * self._g
        free_total = int(self._node_free[self._node_ready].sum())
        active = [q for q in range(nq) if self._pending[q]]
        pos = dict.fromkeys(active, 0)
        tried: set[int] = set()  # one eviction attempt per queue and session
        evicted = False
        guaranteed = float(self.guarantee.sum())
        evicting = self.volcano.reclaim or self.volcano.preempt
        while active and (free_total > 0 or evicting):
            share = [self._alloc[q] / self.deserved[q] if self.deserved[q] > 0 else math.inf for q in active]
            q = active[min(range(len(share)), key=share.__getitem__)]  # first lowest share, as argmin
            queue = self._pending[q]
            job = queue[pos[q]][2]
            g = int(self._gpus[job])
            real_cap = self._real_capability(q, ready_total, guaranteed)
            quota_ok = self._alloc[q] + g <= real_cap
            placed = self._place(g) if quota_ok and g <= free_total else None
            if placed is None and evicting and q not in tried:
                tried.add(q)
                free_before = int(self._node_free[self._node_ready].sum())
                placed = self._evict_for(q, job, g, real_cap)
                free_total += int(self._node_free[self._node_ready].sum()) - free_before
                evicted = evicted or placed is not None
            elif placed is None and free_total <= 0:
                active.remove(q)  # full cluster, and this queue's one eviction attempt is spent
                continue
            if placed is not None:
                queue.pop(pos[q])
                self._start(job, q, placed)
                free_total -= g
            elif quota_ok and self.now - self._submit[job] > self.reserve_after_s:
                active.remove(q)  # head-of-line reservation: the queue waits for this gang
                continue
            else:
                pos[q] += 1
            if pos[q] >= len(queue) or pos[q] >= self.max_scan:
                active.remove(q)
        self._next_session = self.now + self.period_s if evicted else math.inf
        self._record(ready_total)

    def _real_capability(self, q: int, ready_total: int, guaranteed: float) -> float:
        """Volcano's realCapability: ``min(capability, total − Σ guarantee + own guarantee)``."""
        return min(float(self.capability[q]), ready_total - guaranteed + float(self.guarantee[q]))

    def _evict_for(self, q: int, job: int, g: int, real_cap: float) -> np.ndarray | None:
        """Evict so ``job`` (queue ``q``, ``g`` GPUs) can start: reclaim, then preempt (``evict.py``). The GPUs
        the job then gets, or ``None`` when neither action can make it run (nothing is evicted)."""
        free = np.where(self._node_ready, self._node_free, -1)
        tasks = gang_tasks(g, self._g)
        plan: Evictions | None = None
        cause = "reclaim"
        if self.volcano.reclaim and self._alloc[q] + g <= min(self.deserved[q], real_cap):
            plan = self._reclaim(q, tasks, free)
        if plan is None and self.volcano.preempt and self._prio[job] > self._lowest_priority:
            cause = "preempt"
            plan = self._preempt(q, int(self._prio[job]), tasks, free)
            # The queue's capability still holds once its own evicted gangs are gone.
            if plan is not None and self._alloc[q] - plan.taken.get(q, 0) + g > real_cap:
                plan = None
        if plan is None:
            return None
        for v in plan.victims:
            self._finish(v.attempt, killed=True, cause=cause)
        picked = []
        for node, count in plan.placement:
            lo = node * self._g
            picked.append(np.flatnonzero(self._owner[lo : lo + self._g] < 0)[:count] + lo)
        return np.concatenate(picked)

    def _victims(self, queues: Sequence[int]) -> list[Victim]:
        """Running gangs of ``queues`` whose pods may be evicted (``preemptable`` not false)."""
        out = []
        for v in queues:
            for attempt in self._running[v]:
                job = self._log.job[attempt]
                if self._preemptable[job]:
                    gpus, start = self._log.gpus[attempt], self._log.start[attempt]
                    out.append(Victim(attempt, v, gpus, int(self._prio[job]), start))
        return out

    def _reclaim(self, q: int, tasks: list[int], free: np.ndarray) -> Evictions | None:
        over = [
            v
            for v in range(len(self.queue_names))
            if v != q and self._reclaimable[v] and self._alloc[v] > self.deserved[v] and self._running[v]
        ]
        if not over:
            return None
        share = {v: self._alloc[v] / self.deserved[v] if self.deserved[v] > 0 else math.inf for v in over}
        # Lower queue priority gives first, then the queue furthest over its share; inside a queue the lowest
        # priorityClass, then the youngest gang (least work since a checkpoint is lost).
        cands = sorted(
            self._victims(over),
            key=lambda x: (self._q_priority[x.queue], -share[x.queue], x.priority, -x.start, x.attempt),
        )

        def may_take(v: Victim, taken: int) -> bool:
            left = self._alloc[v.queue] - taken
            return bool(left > self.deserved[v.queue] and left - len(v.gpus) >= self.guarantee[v.queue])

        return plan_evictions(tasks, free, cands, self._g, may_take=may_take)

    def _preempt(self, q: int, mine: int, tasks: list[int], free: np.ndarray) -> Evictions | None:
        cands = sorted(
            (v for v in self._victims([q]) if v.priority < mine), key=lambda x: (x.priority, -x.start, x.attempt)
        )
        if not cands:
            return None
        return plan_evictions(tasks, free, cands, self._g, may_take=lambda v, taken: True)

    def _place(self, g: int) -> np.ndarray | None:
        G = self._g
        free = np.where(self._node_ready, self._node_free, -1)
        if g <= G:
            cands = np.flatnonzero(free >= g)
            if len(cands) == 0:
                return None
            nodes = [int(cands[np.argmin(free[cands])])]
            counts = [g]
        else:
            k, r = divmod(g, G)
            full = np.flatnonzero(free == G)
            if len(full) < k:
                return None
            nodes = [int(n) for n in full[:k]]
            counts = [G] * k
            if r:
                rest = free.copy()
                rest[nodes] = -1
                cands = np.flatnonzero(rest >= r)
                if len(cands) == 0:
                    return None
                nodes.append(int(cands[np.argmin(rest[cands])]))
                counts.append(r)
        picked = []
        for node, count in zip(nodes, counts, strict=True):
            lo = node * G
            idle = np.flatnonzero(self._owner[lo : lo + G] < 0)[:count] + lo
            picked.append(idle)
        return np.concatenate(picked)

    def _start(self, job: int, q: int, gpus: np.ndarray) -> None:
        attempt = len(self._log.job)
        overhead = float(self._restart[job]) if self._tries[job] else 0.0
        self._tries[job] += 1
        end = self.now + math.ceil(overhead + max(self._dur[job] - self._done[job], 1.0))
        self._log.job.append(job)
        self._log.start.append(self.now)
        self._log.end.append(end)
        self._log.killed.append(False)
        self._log.gpus.append(gpus)
        self._log.active.append(True)
        self._log.overhead.append(overhead)
        self._log.kept.append(math.nan)  # known when it ends
        self._log.lost.append(math.nan)
        self._log.cause.append("running")
        self._running[q].add(attempt)
        self._owner[gpus] = attempt
        np.add.at(self._node_free, gpus // self._g, -1)
        self._alloc[q] += len(gpus)
        self._pend_gpus[q] -= len(gpus)
        self._running_jobs[q] += 1
        heapq.heappush(self._heap, (end, attempt))

    def _record(self, ready_total: int) -> None:
        self._t.append(self.now)
        self._rec_alloc.append(self._alloc.copy())
        self._rec_pg.append(self._pend_gpus.copy())
        self._rec_pj.append(np.array([len(p) for p in self._pending]))
        self._rec_rj.append(self._running_jobs.copy())
        self._rec_ready.append(ready_total)

    # ----------------------------------------------------------------- output
    def result(self) -> SchedulerResult:
        """Attempts so far (running ones with their planned end) and the per-pass queue timeline."""
        nq = len(self.queue_names)
        empty = np.zeros((0, nq), dtype=np.int64)
        return SchedulerResult(
            attempts=self._log.frame(self.jobs, self._gpus, self._submit, self.cluster.node_names(), self._g),
            attempt_gpus=list(self._log.gpus),
            timeline_s=np.array(self._t, dtype=np.int64),
            allocated=np.array(self._rec_alloc) if self._t else empty,
            pending_gpus=np.array(self._rec_pg) if self._t else empty,
            pending_jobs=np.array(self._rec_pj) if self._t else empty,
            running_jobs=np.array(self._rec_rj) if self._t else empty,
            ready_gpus=np.array(self._rec_ready, dtype=np.int64),
            quota_s=np.array(self._q_t, dtype=np.int64),
            deserved=np.array(self._q_des),
            capability=np.array(self._q_cap),
            queue_names=list(self.queue_names),
            dropped_jobs=self.dropped_jobs,
        )

    def unstarted(self) -> pd.DataFrame:
        """Jobs still pending (submitted, never started or requeued) at ``now``."""
        idx = [entry[2] for queue in self._pending for entry in queue]
        return self.jobs.iloc[sorted(idx)].reset_index(drop=True)
