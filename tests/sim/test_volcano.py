"""Each Volcano rule the simulator copies, on a hand-made cluster small enough to state the exact outcome.

Rules are those of the capacity plugin + reclaim action and the priority plugin + preempt action, as
Volcano's scheduler implements them: deserved is borrowable and reclaimed, guarantee is never reclaimed and
is kept out of other queues' real capability, reclaimable=false queues never give back, preemption is by
priorityClass inside a queue, and a gang stops whole.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from predictor import sim
from predictor.errors import InputError

T0 = pd.Timestamp("2026-01-05", tz="UTC")
ON = sim.VolcanoSettings(reclaim=True, preempt=True)


def _jobs(rows, **extra):
    frame = pd.DataFrame(rows, columns=["submit_s", "queue", "num_gpus", "duration_s"])
    frame["submit_time"] = (T0 + pd.to_timedelta(frame.pop("submit_s"), unit="s")).astype(str)
    for column, values in extra.items():
        frame[column] = values
    return sim.normalise_jobs(frame)


def _sched(jobs, queues, *, nodes=2, volcano=ON):
    return sim.Scheduler(jobs, sim.ClusterSpec.uniform(nodes), queues, start=T0, period_s=1, volcano=volcano)


def _at(s, seconds):
    s.run_until(T0 + pd.Timedelta(seconds=seconds))
    return s.result().attempts


def _two_queues(**a):
    return [
        sim.QueueSpec("a", deserved=a.pop("deserved", 8), capability=16, **a),
        sim.QueueSpec("b", deserved=8, capability=16),
    ]


BORROW = [(0, "a", 8, 10_000), (0, "a", 8, 10_000), (100, "b", 8, 1_000)]  # a borrows b's half, then b asks


def test_reclaim_gives_a_queue_under_deserved_the_gpus_another_borrowed():
    s = _sched(_jobs(BORROW), _two_queues())
    a = _at(s, 101)
    assert s.allocated == {"a": 8, "b": 8}
    assert a["cause"].tolist().count("reclaim") == 1
    b = a[a["queue"] == "b"].iloc[0]
    assert b["start"] == T0 + pd.Timedelta(seconds=100) and b["wait_s"] == 0


def test_a_burst_waiting_on_reclaim_gets_one_gang_a_session_not_one_per_event():
    # a borrows all 16 GPUs with 1-GPU jobs; b's 4 jobs arrive together and nothing else happens for hours.
    # Volcano opens a session every period whatever happens; the simulator reclaims for one gang of a queue
    # per session, so b's jobs start one period apart, not at the next arrival or finish in the cluster.
    rows = [(0, "a", 1, 36_000)] * 16 + [(100, "b", 1, 36_000)] * 4
    s = sim.Scheduler(_jobs(rows), sim.ClusterSpec.uniform(2), _two_queues(), start=T0, period_s=10, volcano=ON)
    a = _at(s, 200)
    b = a[a["queue"] == "b"].sort_values("start")
    assert s.allocated == {"a": 12, "b": 4} and a["cause"].tolist().count("reclaim") == 4
    assert b["wait_s"].tolist() == [0, 10, 20, 30]


def test_without_the_reclaim_action_borrowed_gpus_stay_borrowed():
    s = _sched(_jobs(BORROW), _two_queues(), volcano=sim.VolcanoSettings())  # Volcano's default actions
    a = _at(s, 5_000)
    assert s.allocated == {"a": 16, "b": 0} and not a["killed"].any()


def test_a_queue_that_is_not_reclaimable_never_gives_back():
    s = _sched(_jobs(BORROW), _two_queues(reclaimable=False))
    _at(s, 5_000)
    assert s.allocated == {"a": 16, "b": 0}


def test_reclaim_never_takes_a_queue_below_its_guarantee():
    jobs = _jobs([(0, "a", 8, 10_000), (0, "b", 8, 10_000), (100, "b", 2, 1_000)])
    guarded = [
        sim.QueueSpec("a", deserved=6, capability=16, guarantee=6),
        sim.QueueSpec("b", deserved=10, capability=16),
    ]
    s = _sched(jobs, guarded)
    _at(s, 200)
    assert s.allocated == {"a": 8, "b": 8} and s.pending["b"] == 2  # 8 − 8 = 0 < guarantee 6: no victim
    unguarded = [sim.QueueSpec("a", deserved=6, capability=16), sim.QueueSpec("b", deserved=10, capability=16)]
    s = _sched(jobs, unguarded)
    _at(s, 200)
    assert s.allocated == {"a": 0, "b": 10}  # a was over deserved: its gang is reclaimed whole


def test_a_queue_at_its_deserved_cannot_reclaim():
    jobs = _jobs([(0, "a", 8, 10_000), (0, "b", 8, 10_000), (100, "b", 8, 1_000)])
    s = _sched(jobs, _two_queues())
    _at(s, 200)
    assert s.allocated == {"a": 8, "b": 8} and s.pending["b"] == 8  # b would go over its deserved 8


def test_reclaim_evicts_nothing_when_it_cannot_make_room():
    # b wants a 16-GPU gang; a holds only 4 above its deserved: no prefix of victims frees two whole nodes.
    jobs = _jobs([(0, "a", 4, 10_000), (0, "a", 8, 10_000), (0, "b", 4, 10_000), (100, "b", 16, 100)])
    queues = [sim.QueueSpec("a", deserved=8, capability=16), sim.QueueSpec("b", deserved=24, capability=24)]
    s = _sched(jobs, queues)
    a = _at(s, 200)
    assert not a["killed"].any() and s.pending["b"] == 16


def test_guarantee_is_kept_out_of_other_queues_real_capability():
    # Volcano's realCapability = min(capability, total − Σ guarantee + own guarantee): b's idle guarantee of 8
    # is not lent to a, even though a's capability is the whole cluster.
    jobs = _jobs([(0, "a", 8, 1_000), (0, "a", 8, 1_000)])
    queues = [sim.QueueSpec("a", deserved=8, capability=16), sim.QueueSpec("b", deserved=8, capability=16, guarantee=8)]
    s = _sched(jobs, queues, volcano=sim.VolcanoSettings())
    _at(s, 10)
    assert s.allocated == {"a": 8, "b": 0} and s.pending["a"] == 8


def test_higher_priority_preempts_lower_inside_a_queue_only():
    jobs = _jobs([(0, "a", 8, 10_000), (100, "a", 4, 1_000)], priority=[0, 10])
    s = _sched(jobs, [sim.QueueSpec("a", deserved=8, capability=8)], nodes=1)
    a = _at(s, 101)
    assert a[a["job_id"] == "0"]["cause"].tolist() == ["preempt"]
    assert s.allocated == {"a": 4}
    same = _jobs([(0, "a", 8, 10_000), (100, "a", 4, 1_000)], priority=[10, 10])
    s = _sched(same, [sim.QueueSpec("a", deserved=8, capability=8)], nodes=1)
    assert not _at(s, 200)["killed"].any()  # equal priority waits
    other = _jobs([(0, "a", 8, 10_000), (100, "b", 4, 1_000)], priority=[0, 10])
    queues = [sim.QueueSpec("a", deserved=8, capability=8), sim.QueueSpec("b", deserved=0, capability=8)]
    s = _sched(other, queues, nodes=1)
    assert not _at(s, 200)["killed"].any()  # priority never reaches into another queue


def test_priority_orders_pending_jobs_before_submit_time():
    jobs = _jobs([(0, "a", 8, 100), (1, "a", 8, 100), (2, "a", 8, 100)], priority=[0, 0, 5])
    s = _sched(jobs, [sim.QueueSpec("a", deserved=8, capability=8)], nodes=1, volcano=sim.VolcanoSettings())
    a = _at(s, 1_000).set_index("job_id")
    assert a.loc["2", "start"] < a.loc["1", "start"]


def test_losing_one_node_of_a_gang_stops_the_whole_job():
    jobs = _jobs([(0, "a", 16, 10_000)])
    s = _sched(jobs, [sim.QueueSpec("a", deserved=16, capability=16)])
    _at(s, 100)
    s.set_node_ready(0, False)
    a = s.result().attempts
    assert a["cause"].tolist() == ["node"] and s.allocated == {"a": 0} and s.pending["a"] == 16


def test_an_evicted_job_keeps_work_to_its_last_checkpoint_and_pays_the_restart():
    jobs = _jobs(
        [(0, "a", 8, 10_000), (8_000, "a", 8, 1_000)],
        priority=[0, 1],
        checkpoint_s=[3_600, 3_600],
        restart_s=[300, 300],
    )
    s = _sched(jobs, [sim.QueueSpec("a", deserved=8, capability=8)], nodes=1)
    a = _at(s, 20_000)
    first, second = a[a["job_id"] == "0"].iloc[0], a[a["job_id"] == "0"].iloc[1]
    assert (first["cause"], first["kept_s"], first["lost_s"]) == ("preempt", 7_200, 800)
    assert second["start"] == T0 + pd.Timedelta(seconds=9_000)  # after the preemptor's 1,000 s
    assert (second["end"] - second["start"]).total_seconds() == 300 + 10_000 - 7_200
    assert (second["overhead_s"], second["kept_s"], second["lost_s"]) == (300, 2_800, 0)


def test_without_checkpoints_an_evicted_job_starts_over():
    jobs = _jobs([(0, "a", 8, 10_000), (8_000, "a", 8, 1_000)], priority=[0, 1])
    s = _sched(jobs, [sim.QueueSpec("a", deserved=8, capability=8)], nodes=1)
    a = _at(s, 30_000)
    first, second = a[a["job_id"] == "0"].iloc[0], a[a["job_id"] == "0"].iloc[1]
    assert first["lost_s"] == 8_000 and first["kept_s"] == 0 and math.isclose(second["kept_s"], 10_000)


def test_bad_job_columns_are_named():
    with pytest.raises(InputError, match="checkpoint_s"):
        _jobs([(0, "a", 8, 10)], checkpoint_s=[-1])


# a holds 12 GPUs over a deserved of 8, b holds 4 at its deserved and waits for 4 more: no reclaim until a plan
# raises b to 8 and a to 12, where b is below its share but a is not above its own, so nothing is reclaimable.
PLAN_BOTH = [(0, "a", 4, 10_000), (0, "a", 4, 10_000), (0, "a", 4, 10_000), (0, "b", 4, 10_000), (50, "b", 4, 100)]


def _plan_both_queues():
    return [sim.QueueSpec("a", deserved=8, capability=16), sim.QueueSpec("b", deserved=4, capability=16)]


def test_a_plan_set_queue_by_queue_reclaims_for_its_half_applied_state():
    s = _sched(_jobs(PLAN_BOTH), _plan_both_queues())
    _at(s, 60)
    assert s.allocated == {"a": 12, "b": 4} and s.pending["b"] == 4
    s.set_quota("b", deserved=8)  # a pass between the two writes: b below its share, a still above its 8
    s.set_quota("a", deserved=12)
    assert s.allocated == {"a": 8, "b": 8}
    assert s.result().attempts["cause"].tolist().count("reclaim") == 1


def test_a_plan_set_at_once_reaches_one_session_and_reclaims_only_for_its_whole_state():
    s = _sched(_jobs(PLAN_BOTH), _plan_both_queues())
    _at(s, 60)
    s.set_quotas({"b": sim.Quota(deserved=8), "a": sim.Quota(deserved=12)})
    assert s.allocated == {"a": 12, "b": 4} and s.pending["b"] == 4
    assert "reclaim" not in s.result().attempts["cause"].tolist()
    assert (list(s.deserved), list(s.capability)) == ([12.0, 8.0], [16.0, 16.0])


def test_a_plan_naming_an_unknown_queue_changes_nothing():
    s = _sched(_jobs(PLAN_BOTH), _plan_both_queues())
    with pytest.raises(InputError, match="unknown queue 'zz'"):
        s.set_quotas({"a": sim.Quota(deserved=12), "zz": sim.Quota(deserved=1)})
    assert list(s.deserved) == [8.0, 4.0]
