"""Ground truth the tree learns from: a window labelled healthy must not carry a fault's symptom."""

from __future__ import annotations

import pandas as pd

from pipelines.rca_data import label_windows
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


def _one_fault(start_min: int, end_min: int) -> pd.DataFrame:
    t0 = pd.Timestamp("2026-03-02T10:00:00Z")
    return pd.DataFrame(
        [
            {
                "cause": "gpu_thermal",
                "start": t0 + pd.Timedelta(minutes=start_min),
                "end": t0 + pd.Timedelta(minutes=end_min),
                "node": "n1",
                "nodes": "n1",
                "queue": "q",
                "strength": 0.8,
            }
        ]
    )


def test_a_fault_spanning_a_quarter_of_the_window_labels_it_and_a_fainter_one_drops_it() -> None:
    # Operators ask about a window; a GPU that overheated for four of its fifteen minutes is the answer.
    at, window = pd.Timestamp("2026-03-02T10:30:00Z"), pd.Timedelta(minutes=15)
    features = pd.DataFrame({"node": ["n1", "n2"], "queue": ["", ""]})
    quarter = label_windows(features, _one_fault(26, 40), at, window)  # 4 of the window's 15 minutes
    assert dict(zip(quarter["node"], quarter["label"], strict=True)) == {"n1": "gpu_thermal", "n2": "healthy"}
    faint = label_windows(features, _one_fault(28, 40), at, window)  # 2 minutes: neither fault nor healthy
    assert list(faint["node"]) == ["n2"]
