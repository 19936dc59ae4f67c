from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from predictor import sim
from predictor.errors import InputError

T0 = pd.Timestamp("2026-01-05", tz="UTC")


def _jobs(rows):
    frame = pd.DataFrame(rows, columns=["submit_s", "queue", "num_gpus", "duration_s"])
    frame["submit_time"] = (T0 + pd.to_timedelta(frame.pop("submit_s"), unit="s")).astype(str)
    return sim.normalise_jobs(frame)


def _run(jobs, nodes=2, queues=None, until=10_000):
    cluster = sim.ClusterSpec.uniform(nodes)
    queues = queues or sim.default_queues(jobs, cluster.n_gpus)
    s = sim.Scheduler(jobs, cluster, queues, start=T0, period_s=1)
    s.run_until(T0 + pd.Timedelta(seconds=until))
    return s, s.result()


def test_gang_binpack_and_capacity():
    jobs = _jobs([(0, "a", 4, 100), (0, "a", 4, 100), (0, "a", 12, 50), (1, "a", 1, 10)])
    _, r = _run(jobs)
    a = r.attempts.set_index("job_id")
    # binpack: the two 4-GPU jobs share one node, the 12-GPU gang waits for both nodes
    assert a.loc["0", "nodes"] == a.loc["1", "nodes"]
    assert a.loc["2", "start"] >= a.loc["0", "end"]
    assert len(r.attempt_gpus[a.index.get_loc("2")]) == 12
    assert r.allocated.sum(axis=1).max() <= 16
    assert (r.allocated >= 0).all()


def test_fifo_reservation_after_long_wait():
    cluster = sim.ClusterSpec.uniform(1)
    jobs = _jobs([(0, "a", 8, 10_000), (1, "a", 8, 100), (2, "a", 1, 100)])
    s = sim.Scheduler(
        jobs, cluster, [sim.QueueSpec("a", deserved=8, capability=8)], start=T0, period_s=1, reserve_after_s=0
    )
    s.run_until(T0 + pd.Timedelta(hours=5))
    a = s.result().attempts.set_index("job_id")
    assert a.loc["2", "start"] >= a.loc["1", "start"]  # the 1-GPU job did not jump the waiting gang


def test_capability_caps_a_queue_and_set_quota_releases_it():
    jobs = _jobs([(0, "a", 8, 1000), (0, "a", 8, 1000), (0, "b", 1, 1000)])
    queues = [sim.QueueSpec("a", deserved=8, capability=8), sim.QueueSpec("b", deserved=8, capability=16)]
    cluster = sim.ClusterSpec.uniform(3)
    s = sim.Scheduler(jobs, cluster, queues, start=T0, period_s=1)
    s.run_until(T0 + pd.Timedelta(seconds=10))
    assert s.allocated == {"a": 8, "b": 1}
    assert s.pending["a"] == 8  # free GPUs exist, but the queue is at its capability
    s.set_quota("a", deserved=16, capability=16)
    assert s.allocated["a"] == 16
    with pytest.raises(InputError, match="unknown queue"):
        s.set_quota("zz", capability=1)


def test_node_not_ready_kills_and_requeues():
    jobs = _jobs([(0, "a", 8, 1000)])
    cluster = sim.ClusterSpec.uniform(2)
    s = sim.Scheduler(jobs, cluster, sim.default_queues(jobs, 16), start=T0, period_s=1)
    s.run_until(T0 + pd.Timedelta(seconds=100))
    node = int(s.result().attempt_gpus[0][0]) // 8
    s.set_node_ready(node, False)
    r = s.result()
    assert len(r.attempts) == 2 and bool(r.attempts["killed"].iloc[0])
    assert int(r.attempt_gpus[1][0]) // 8 != node


def test_proportional_sharing_across_queues():
    rows = [(0, q, 1, 5000) for q in ("a", "b") for _ in range(40)]
    jobs = _jobs(rows)
    queues = [sim.QueueSpec("a", deserved=12, capability=32), sim.QueueSpec("b", deserved=4, capability=32)]
    cluster = sim.ClusterSpec.uniform(2)
    s = sim.Scheduler(jobs, cluster, queues, start=T0, period_s=1)
    s.run_until(T0 + pd.Timedelta(seconds=10))
    assert s.allocated == {"a": 12, "b": 4}


def test_jobs_larger_than_the_cluster_are_dropped():
    jobs = _jobs([(0, "a", 64, 10), (0, "a", 1, 10)])
    _, r = _run(jobs)
    assert r.dropped_jobs == 1 and len(r.attempts) == 1
    assert np.all(r.allocated <= 16)
