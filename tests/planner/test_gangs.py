"""Targets that respect how GPU jobs run: each rule of planner.gangs on a small hand-made cluster."""

from __future__ import annotations

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from predictor.planner import PlannerSettings, QueueState, plan_queues, targets_from_mapping
from predictor.planner.decisions import REASON_CODES
from predictor.planner.gangs import pool_gpus, shape_targets
from predictor.planner.targets import Target
from predictor.planner.workload import JobSummary, NodeSummary, Taint, Toleration, Workload

GPU = "nvidia.com/gpu"
NOW = pd.Timestamp("2026-11-02T00:00:00Z")
SETTINGS = PlannerSettings()  # type: ignore[call-arg]
INFER_TAINT = Taint("dedicated", "infer", "NoSchedule")
NODES = (
    NodeSummary("a1", 8, labels=(("gpu", "a100"),)),
    NodeSummary("a2", 8, labels=(("gpu", "a100"),)),
    NodeSummary("h1", 8, labels=(("gpu", "h100"),)),
    NodeSummary("i1", 8, taints=(INFER_TAINT,)),
    NodeSummary("i2", 8, taints=(INFER_TAINT,)),
)


def job(queue: str, pods: int, per_pod: int, **kw: object) -> JobSummary:
    return JobSummary(
        queue=queue,
        name=f"{queue}-{pods}x{per_pod}-{kw.get('phase', 'pending')}",
        pods=pods,
        gpus_per_pod=per_pod,
        **kw,
    )  # type: ignore[arg-type]


def shaped(
    values: tuple[float, float, float], *jobs: JobSummary, queue: str = "train", nodes: tuple[NodeSummary, ...] = NODES
) -> Target:
    targets = targets_from_mapping({(queue, GPU): values})
    return shape_targets(targets, Workload(tuple(jobs), nodes), SETTINGS)[(queue, GPU)]


def codes(target: Target) -> dict[str, str]:
    return {f: code for f, code, _ in target.notes}


def test_without_job_data_targets_are_unchanged() -> None:
    targets = targets_from_mapping({("train", GPU): (12.0, 20.0, 4.0)})
    assert shape_targets(targets, None, SETTINGS) == targets


def test_capability_is_raised_to_the_largest_pending_or_recurring_gang() -> None:
    target = shaped(
        (10.0, 12.0, 0.0),
        job("train", 4, 4),
        job("train", 1, 2, phase="running"),
        job("train", 5, 4, phase="running", recurring=True),
    )
    assert (target.deserved, target.capability, target.guarantee) == (10.0, 20.0, 0.0)  # recurring 20 > pending 16
    assert codes(target) == {"capability": "gang_floor"}
    assert target.capability_floor == 20.0
    assert {"gang_floor", "whole_nodes", "pool", "steady_priority"} <= set(REASON_CODES)


def test_a_running_one_off_gang_sets_no_floor_and_a_queue_without_jobs_gets_none() -> None:
    running = shaped((4.0, 6.0, 0.0), job("train", 4, 4, phase="running"))
    assert (running.capability, running.notes, running.capability_floor) == (6.0, (), 0.0)
    other = shaped((4.0, 6.0, 2.0), job("infer", 8, 8), queue="train")  # jobs known, none in this queue
    assert (other.deserved, other.capability, other.guarantee, other.ceiling) == (4.0, 6.0, 2.0, None)


def test_queues_whose_jobs_take_whole_nodes_round_to_whole_nodes() -> None:
    target = shaped((12.0, 20.0, 10.0), job("train", 2, 8), job("train", 1, 8, phase="running"))
    assert (target.deserved, target.capability, target.guarantee) == (16.0, 24.0, 8.0)
    assert codes(target) == {"deserved": "whole_nodes", "capability": "whole_nodes", "guarantee": "whole_nodes"}
    mixed = shaped((12.0, 20.0, 10.0), job("train", 2, 8), job("train", 1, 4))  # one job takes half a node
    assert (mixed.deserved, mixed.capability, mixed.guarantee) == (12.0, 20.0, 10.0)


def test_a_queue_is_never_promised_gpus_outside_its_pool() -> None:
    # train jobs tolerate nothing and select a100: only a1, a2 (16 GPUs); i1/i2 are tainted, h1 is h100.
    train = shaped((20.0, 30.0, 4.0), job("train", 1, 4, node_selector=(("gpu", "a100"),)))
    assert (train.deserved, train.capability, train.guarantee, train.ceiling) == (16.0, 16.0, 4.0, 16.0)
    assert codes(train) == {"deserved": "pool", "capability": "pool"}
    tolerant = job("infer", 1, 1, tolerations=(Toleration("dedicated", "Equal", "infer", "NoSchedule"),))
    assert pool_gpus([tolerant], Workload((tolerant,), NODES)) == 40.0  # tolerates the taint: every node
    anything = job("infer", 1, 1, tolerations=(Toleration(operator="Exists"),))
    assert pool_gpus([anything], Workload((anything,), NODES)) == 40.0
    wrong_value = job("infer", 1, 1, tolerations=(Toleration("dedicated", "Equal", "train", "NoSchedule"),))
    assert pool_gpus([wrong_value], Workload((wrong_value,), NODES)) == 24.0  # a1, a2, h1
    prefer = NodeSummary("p1", 8, taints=(Taint("spot", "", "PreferNoSchedule"),))
    assert pool_gpus([job("q", 1, 1)], Workload((), (prefer,))) == 8.0  # PreferNoSchedule does not block


def test_a_gang_larger_than_its_pool_says_so_and_stays_at_the_pool() -> None:
    target = shaped((8.0, 8.0, 0.0), job("train", 3, 8, node_selector=(("gpu", "a100"),)))
    assert (target.capability, target.capability_floor, target.ceiling) == (16.0, 16.0, 16.0)
    code, reason = next((c, r) for f, c, r in target.notes if f == "capability")
    assert code == "pool"
    assert "largest gang 24 GPUs exceeds the 16 GPUs" in reason


def test_guarantee_covers_only_the_steady_high_priority_demand() -> None:
    high = SETTINGS.high_priority
    target = shaped(
        (24.0, 32.0, 20.0),
        job("train", 1, 6, recurring=True, priority=high, phase="running"),
        job("train", 1, 8, recurring=True, priority=0),
        job("train", 1, 4, priority=high),
    )
    assert target.guarantee == 6.0  # recurring and high priority; the low-priority and one-off jobs are not
    assert codes(target)["guarantee"] == "steady_priority"
    low = shaped((24.0, 32.0, 3.0), job("train", 1, 6, recurring=True, priority=high))
    assert low.guarantee == 3.0  # never raised above what the forecast floor asks
    unknown = shaped((24.0, 32.0, 20.0), job("train", 1, 6, priority=high))  # nothing marked recurring anywhere
    assert unknown.guarantee == 20.0


def queue(name: str, capability: float, deserved: float, allocated: float = 0.0) -> QueueState:
    return QueueState(
        name, deserved={GPU: deserved}, capability={GPU: capability}, guarantee={GPU: 0.0}, allocated={GPU: allocated}
    )


def test_the_gang_floor_and_pool_ceiling_are_hard_in_the_plan() -> None:
    # max_step would let capability grow 8 → 16 and the shrink window would hold 64 for 6 h: both are bypassed.
    workload = Workload(
        (job("grow", 3, 8), job("shrink", 1, 2, phase="running", nodes=("a1",), node_selector=(("gpu", "a100"),))),
        NODES,
    )
    targets = shape_targets(
        targets_from_mapping({("grow", GPU): (8.0, 8.0, 0.0), ("shrink", GPU): (8.0, 64.0, 0.0)}), workload, SETTINGS
    )
    plan = plan_queues([queue("grow", 8.0, 8.0), queue("shrink", 64.0, 8.0, allocated=2.0)], targets, SETTINGS, now=NOW)
    assert plan.desired["grow"].capability[GPU] == 24.0
    assert plan.desired["shrink"].capability[GPU] == 16.0
    by_queue = {(c.queue, c.field): c for c in plan.changes}
    assert by_queue[("grow", "capability")].code == "gang_floor"
    assert by_queue[("shrink", "capability")].code == "pool"
    assert not [h for h in plan.held if h.code in ("gang_floor", "pool")]


def test_a_pool_below_allocated_says_the_value_it_keeps() -> None:
    """A queue whose jobs fit no node (pool 0) still runs 2 GPUs: capability stops at allocated, and the reason
    says so instead of claiming it was lowered to 0 while the plan writes 2."""
    workload = Workload((job("lost", 1, 2, node_selector=(("gpu", "none"),)),), NODES)
    targets = shape_targets(targets_from_mapping({("lost", GPU): (8.0, 8.0, 0.0)}), workload, SETTINGS)
    plan = plan_queues([queue("lost", 8.0, 4.0, allocated=2.0)], targets, SETTINGS, now=NOW)
    change = {c.field: c for c in plan.changes}["capability"]
    assert (change.after, change.code) == (2.0, "pool")
    assert "0 GPUs of the nodes" in change.reason and "kept at the 2 GPUs allocated" in change.reason


def test_a_field_already_at_its_shaped_target_is_neither_changed_nor_held() -> None:
    workload = Workload((job("q", 3, 8),), NODES)
    targets = shape_targets(targets_from_mapping({("q", GPU): (8.0, 8.0, 0.0)}), workload, SETTINGS)
    plan = plan_queues([queue("q", 24.0, 8.0)], targets, SETTINGS, now=NOW)
    assert [c for c in plan.changes if c.field == "capability"] == []
    assert [h for h in plan.held if h.field == "capability"] == []


def test_queues_confined_to_the_same_nodes_share_them_in_their_guarantees() -> None:
    # infer-a and infer-b tolerate no taint: both are confined to the untainted a1, a2, h1 (24 GPUs), the
    # a100 selector narrows infer-b to a1, a2 (16 GPUs); free tolerates everything (all 40 GPUs).
    targets = targets_from_mapping(
        {("infer-a", GPU): (24.0, 24.0, 18.0), ("infer-b", GPU): (16.0, 16.0, 12.0), ("free", GPU): (40.0, 40.0, 30.0)}
    )
    jobs = (
        job("infer-a", 1, 1),
        job("infer-b", 1, 1, node_selector=(("gpu", "a100"),)),
        job("free", 1, 1, tolerations=(Toleration(operator="Exists"),)),
    )
    out = shape_targets(targets, Workload(jobs, NODES), SETTINGS)
    # pool {a1, a2} (16): infer-b alone, 12 fits. Pool {a1, a2, h1} (24): 18 + 12 = 30 > 24 → × 0.8 → 14, 9.
    # Every node (40 GPUs): 14 + 9 + 30 = 53 > 40 → × 40/53 → 10, 6, 22 (whole GPUs, rounded down).
    assert [out[(q, GPU)].guarantee for q in ("infer-a", "infer-b", "free")] == [10.0, 6.0, 22.0]
    assert codes(out[("infer-a", GPU)])["guarantee"] == "pool"
    small = shape_targets(targets_from_mapping({("infer-b", GPU): (16.0, 16.0, 12.0)}), Workload(jobs, NODES), SETTINGS)
    assert small[("infer-b", GPU)].guarantee == 12.0  # alone in its pool: it fits


@st.composite
def workloads(draw: st.DrawFn) -> Workload:
    taints = st.sampled_from([(), (INFER_TAINT,)])
    nodes = tuple(
        NodeSummary(
            f"n{i}",
            draw(st.sampled_from([0, 8])),
            labels=(("gpu", draw(st.sampled_from(["a100", "h100"]))),),
            taints=draw(taints),
        )
        for i in range(draw(st.integers(1, 6)))
    )
    jobs = tuple(
        JobSummary(
            queue=draw(st.sampled_from(["q1", "q2"])),
            name=f"j{i}",
            pods=draw(st.integers(1, 4)),
            gpus_per_pod=draw(st.sampled_from([1, 2, 4, 8])),
            phase=draw(st.sampled_from(["pending", "running"])),
            recurring=draw(st.booleans()),
            priority=draw(st.sampled_from([0, 1000, None])),
            tolerations=draw(st.sampled_from([(), (Toleration(operator="Exists"),)])),
            node_selector=draw(st.sampled_from([(), (("gpu", "a100"),)])),
        )
        for i in range(draw(st.integers(0, 5)))
    )
    return Workload(jobs, nodes)


@given(workloads(), st.lists(st.integers(0, 80), min_size=6, max_size=6))
@settings(max_examples=200, deadline=None)
def test_shaped_targets_stay_ordered_inside_their_pool_and_above_their_gang(workload: Workload, raw: list[int]) -> None:
    values = {}
    for i, queue in enumerate(("q1", "q2")):
        g, d, c = sorted(float(v) for v in raw[3 * i : 3 * i + 3])
        values[(queue, GPU)] = (d, c, g)
    out = shape_targets(targets_from_mapping(values), workload, SETTINGS)
    for (queue, _), target in out.items():
        assert 0 <= target.guarantee <= target.deserved <= target.capability
        jobs = workload.queue_jobs(queue)
        pool = pool_gpus(jobs, workload)
        if pool is not None:
            assert target.capability <= pool and target.ceiling == pool
        gang = max((j.gpus for j in jobs if j.phase == "pending" or j.recurring), default=0)
        assert target.capability >= min(gang, pool if pool is not None else gang)
        assert {code for _, code, _ in target.notes} <= {"gang_floor", "whole_nodes", "pool", "steady_priority"}


def test_whole_nodes_round_to_the_node_size_of_the_workload() -> None:
    four = tuple(NodeSummary(f"n{i}", 4) for i in range(6))
    targets = targets_from_mapping({("train", GPU): (6.0, 10.0, 5.0)})
    workload = Workload((job("train", 2, 4), job("train", 1, 4, phase="running")), four, gpus_per_node=4)
    target = shape_targets(targets, workload, SETTINGS)[("train", GPU)]
    assert (target.deserved, target.capability, target.guarantee) == (8.0, 12.0, 4.0)  # 4-GPU nodes, not 8
