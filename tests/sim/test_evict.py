"""Where reclaim and preempt evict, one test per rule of Volcano's reclaim and preempt actions
(volcano-sh/volcano v1.16.0-alpha.1, ``pkg/scheduler/actions/reclaim/reclaim.go``,
``pkg/scheduler/actions/preempt/preempt.go``, ``pkg/scheduler/api/pod_info.go``): victims are taken task by
task and node by node in victim order, only on the node where the pending task then fits, only if the whole
gang can then run, never a pod marked not preemptable, and (reclaim) only from other reclaimable queues above
their deserved.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from predictor import sim
from predictor.errors import InputError
from predictor.sim.evict import Victim, gang_tasks, plan_evictions

T0 = pd.Timestamp("2026-01-05", tz="UTC")
ON = sim.VolcanoSettings(reclaim=True, preempt=True)
LONG = 100_000


def _jobs(rows, **extra):
    frame = pd.DataFrame(rows, columns=["submit_s", "queue", "num_gpus", "duration_s"])
    frame["submit_time"] = (T0 + pd.to_timedelta(frame.pop("submit_s"), unit="s")).astype(str)
    for column, values in extra.items():
        frame[column] = values
    return sim.normalise_jobs(frame)


def _run(jobs, queues, *, nodes=2, until=200):
    s = sim.Scheduler(jobs, sim.ClusterSpec.uniform(nodes), queues, start=T0, period_s=1, volcano=ON)
    s.run_until(T0 + pd.Timedelta(seconds=until))
    return s, s.result().attempts


def _evicted(attempts, cause="reclaim"):
    return sorted(attempts[attempts["cause"] == cause]["job_id"].tolist(), key=int)


def _victim(attempt, node, count, per_node=8, queue=0):
    return Victim(attempt, queue, np.arange(count) + node * per_node, 0, attempt)


def _take_all(v, taken):
    return True


# Two 8-GPU nodes full of queue a's gangs; b (deserved 8) submits one 8-GPU gang at t=100.
# Node 0 holds job 0 (4 GPUs, oldest) and job 6 (4 GPUs, youngest: it took the place of job 1, which ended);
# node 1 holds jobs 2-5 (2 GPUs each). Youngest first across all nodes, the old rule evicted job 6 and then
# jobs 5, 4, 3, 2: 5 gangs and 12 GPUs, 4 of them (job 6's) useless to b.
TWO_NODES = [
    (0, "a", 4, LONG),
    (1, "a", 4, 5),
    (2, "a", 2, LONG),
    (3, "a", 2, LONG),
    (4, "a", 2, LONG),
    (5, "a", 2, LONG),
    (10, "a", 4, LONG),
    (100, "b", 8, 1_000),
]


def _ab(a_deserved=4, **a):
    return [
        sim.QueueSpec("a", deserved=a_deserved, capability=16, **a),
        sim.QueueSpec("b", deserved=8, capability=16),
    ]


def test_the_two_node_example_evicts_only_what_the_8_gpu_gang_needs():
    s, a = _run(_jobs(TWO_NODES), _ab())
    assert _evicted(a) == ["0", "6"]  # node 0's two gangs: 8 GPUs, all of them b's
    b = a[a["queue"] == "b"].iloc[0]
    assert b["nodes"] == sim.ClusterSpec.uniform(2).node_names()[0]
    assert b["start"] == T0 + pd.Timedelta(seconds=100)
    assert s.allocated == {"a": 8, "b": 8}


def test_victims_are_popped_in_victim_order_youngest_gang_first():
    # One node: a's gangs started at 0 and 50; b's 4-GPU gang needs one of them: the younger one goes.
    jobs = _jobs([(0, "a", 4, LONG), (50, "a", 4, LONG), (100, "b", 4, 1_000)])
    _, a = _run(jobs, _ab(), nodes=1)
    assert _evicted(a) == ["1"]
    # Lower queue priority gives first, before age: c's older gang goes before a's younger one.
    jobs = _jobs([(0, "c", 4, LONG), (50, "a", 4, LONG), (100, "b", 4, 1_000)])
    queues = [*_ab(), sim.QueueSpec("c", deserved=0, capability=16, priority=-1)]
    _, a = _run(jobs, queues, nodes=1)
    assert _evicted(a) == ["0"]


def test_evictions_happen_only_on_the_node_where_the_task_then_fits():
    # Victim order reaches node 0 first, but 2 GPUs there cannot fit a 4-GPU task: node 0's evictions are
    # discarded and node 1's first victim makes room.
    cands = [_victim(0, node=0, count=2), _victim(1, node=1, count=8), _victim(2, node=1, count=0)]
    plan = plan_evictions([4], np.array([0, 0]), cands[:2], 8, may_take=_take_all)
    assert plan is not None
    assert [v.attempt for v in plan.victims] == [1] and plan.placement == [(1, 4)]
    # A gang on two nodes: evicting its task on node 1 frees only node 1's GPUs for the pending task.
    spread = Victim(0, 0, np.array([6, 7, 8, 9]), 0, 0)  # 2 GPUs on node 0, 2 on node 1
    assert plan_evictions([4], np.array([0, 0]), [spread], 8, may_take=_take_all) is None
    plan = plan_evictions([4], np.array([0, 2]), [spread], 8, may_take=_take_all)
    assert plan is not None and plan.placement == [(1, 4)] and plan.taken == {0: 4}


def test_nothing_is_evicted_when_the_gang_cannot_then_run():
    # A 16-GPU gang is two 8-GPU tasks; node 0 can be emptied, node 1 holds nothing evictable.
    assert gang_tasks(16, 8) == [8, 8] and gang_tasks(12, 8) == [8, 4] and gang_tasks(3, 8) == [3]
    assert plan_evictions([8, 8], np.array([0, 0]), [_victim(0, 0, 8)], 8, may_take=_take_all) is None
    # In the scheduler: b's 16-GPU gang needs both nodes; a's node is reclaimable, c's is not.
    jobs = _jobs([(0, "a", 8, LONG), (0, "c", 8, LONG), (100, "b", 16, 1_000)])
    queues = [*_ab(a_deserved=0), sim.QueueSpec("c", deserved=0, capability=16, reclaimable=False)]
    queues[1] = sim.QueueSpec("b", deserved=16, capability=16)
    s, a = _run(jobs, queues)
    assert not a["killed"].any() and s.pending["b"] == 16


@pytest.mark.parametrize("cause", ["reclaim", "preempt"])
def test_a_job_marked_not_preemptable_is_never_evicted(cause):
    if cause == "reclaim":
        rows, queues, extra = [(0, "a", 8, LONG), (1, "a", 8, LONG), (100, "b", 8, 1_000)], _ab(), {}
    else:
        rows, queues = [(0, "a", 8, LONG), (1, "a", 8, LONG), (100, "a", 8, 1_000)], _ab(a_deserved=16)
        extra = {"priority": [0, 0, 10]}
    # Jobs 0 and 1 hold node 0 and node 1; nodes are tried in turn, so job 0 is the victim when both may go.
    _, a = _run(_jobs(rows, **extra), queues)  # no column: every job is preemptable
    assert _evicted(a, cause) == ["0"]
    _, a = _run(_jobs(rows, preemptable=["false", "true", "true"], **extra), queues)
    assert _evicted(a, cause) == ["1"]
    s, a = _run(_jobs(rows, preemptable=[False, False, True], **extra), queues)
    assert not a["killed"].any() and s.pending[rows[2][1]] == 8


def test_reclaim_takes_only_from_other_reclaimable_queues_above_their_deserved():
    # Node 0: c (not reclaimable, over its deserved); node 1: d (at its deserved); node 2: a (over its
    # deserved). Nodes are tried in turn, so only a's gang on node 2 can be b's victim.
    jobs = _jobs([(0, "c", 8, LONG), (1, "d", 8, LONG), (2, "a", 8, LONG), (100, "b", 8, 1_000)])
    queues = [
        sim.QueueSpec("a", deserved=0, capability=24),
        sim.QueueSpec("b", deserved=8, capability=24),
        sim.QueueSpec("c", deserved=0, capability=24, reclaimable=False),
        sim.QueueSpec("d", deserved=8, capability=24),
    ]
    s, a = _run(jobs, queues, nodes=3)
    assert _evicted(a) == ["2"] and s.allocated == {"a": 0, "b": 8, "c": 8, "d": 8}
    # b's own lower-priority gang is never reclaimed for b (that is preempt's job, by priority).
    jobs = _jobs([(0, "b", 8, LONG), (100, "b", 8, 1_000)])
    s, a = _run(jobs, [sim.QueueSpec("b", deserved=16, capability=16)], nodes=1)
    assert not a["killed"].any()


def test_preempt_evicts_lower_priority_gangs_of_the_queue_on_one_node():
    # The same two-node layout inside one queue: a's high-priority 8-GPU gang evicts node 0's two gangs.
    rows = [(t, "a", g, d) for t, _, g, d in TWO_NODES]
    jobs = _jobs(rows, priority=[0, 0, 0, 0, 0, 0, 0, 10])
    s, a = _run(jobs, [sim.QueueSpec("a", deserved=16, capability=16)])
    assert _evicted(a, "preempt") == ["0", "6"] and s.allocated == {"a": 16}


def test_the_preemptable_column_reads_true_and_false_and_names_a_bad_value():
    jobs = _jobs([(0, "a", 1, 10)] * 4, preemptable=["False", "no", "TRUE", None])
    assert jobs["preemptable"].tolist() == [False, False, True, True]
    with pytest.raises(InputError, match=r"'preemptable' must be true or false \(row 3: 'maybe'\)"):
        _jobs([(0, "a", 1, 10)] * 2, preemptable=["true", "maybe"])
