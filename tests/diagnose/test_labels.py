"""Ground truth the tree learns from: a window labelled healthy must not carry a fault's symptom."""

from __future__ import annotations

from predictor.sim.faults import plan_scheduler_faults
from predictor.sim.series import StepGrid


def test_scheduler_faults_never_overlap_on_one_queue_or_node() -> None:
    # Overlapping quota cuts on one queue restored in the wrong order and left capability 0 after both
    # ended, in windows labelled healthy (280 such rows in the last bench). One queue, two nodes, dense
    # faults: every pair on the same queue or node must be disjoint.
    grid = StepGrid(start_s=1_772_409_600, step_s=60, n_steps=60 * 24)
    plans, _ = plan_scheduler_faults(400, grid, n_nodes=2, queues=["only"], seed=5)
    assert len({p.cause for p in plans}) == 2 and len(plans) > 10
    for i, a in enumerate(plans):
        assert a.fault_id == i
        for b in plans[i + 1 :]:
            same = a.cause == b.cause and (a.queue, a.node) == (b.queue, b.node)
            assert not (same and a.start_s < b.end_s and b.start_s < a.end_s), (a, b)
