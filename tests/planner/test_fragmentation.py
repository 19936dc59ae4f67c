"""FGD fragmentation from nodes and pods, the defragmentation advice, and the workload read from the API."""

from __future__ import annotations

from typing import Any

import pytest

from predictor.errors import InputError
from predictor.planner.fragmentation import Move, defrag_advice, fgd, task_mix
from predictor.planner.workload import (
    JobSummary,
    NodeSummary,
    Taint,
    Toleration,
    Workload,
    node_size,
    workload_from_objects,
)

TAINT = Taint("dedicated", "infer", "NoSchedule")


def running(name: str, gpus: int, node: str) -> JobSummary:
    return JobSummary("train", name, 1, gpus, phase="running", nodes=(node,))


def cluster(n2_taint: bool = False) -> Workload:
    jobs = (
        running("a", 2, "n1"),
        running("b", 4, "n2"),
        running("c", 2, "n2"),
        running("d", 3, "n3"),
        running("e", 5, "n4"),
        JobSummary("train", "g", 2, 8),
    )
    used = {"n1": 2, "n2": 6, "n3": 3, "n4": 5}
    nodes = tuple(NodeSummary(n, 8, u, taints=(TAINT,) if n2_taint and n == "n2" else ()) for n, u in used.items())
    return Workload(jobs, nodes)


def test_fgd_counts_the_free_gpus_each_task_of_the_mix_cannot_use() -> None:
    workload = cluster()
    assert task_mix(workload) == pytest.approx({2: 2 / 7, 3: 1 / 7, 4: 1 / 7, 5: 1 / 7, 8: 2 / 7})
    frag = fgd(workload.nodes, task_mix(workload))
    # n1 free 6 (8s: 2/7), n2 free 2 (3,4,5,8: 5/7), n3 free 5 (8: 2/7), n4 free 3 (4,5,8: 4/7)
    assert frag.gpus == pytest.approx((6 * 2 + 2 * 5 + 5 * 2 + 3 * 4) / 7)
    assert (frag.free, frag.free_nodes) == (16, 0)
    assert frag.rate == pytest.approx(frag.gpus / 16)
    whole = fgd([NodeSummary("x", 8), NodeSummary("down", 0)], {8: 1.0})
    assert (whole.gpus, whole.free, whole.free_nodes, whole.rate) == (0.0, 8, 1, 0.0)


def test_advice_drains_the_least_used_nodes_until_the_waiting_gang_fits() -> None:
    advice = defrag_advice(cluster())
    assert advice.drain == ("n1", "n3")
    assert advice.moves == (Move("a", 2, "n1", "n2"), Move("d", 3, "n3", "n4"))  # into the fullest gap that fits
    assert (advice.restarted_jobs, advice.restarted_gpus) == (("a", "d"), 5)
    assert (advice.after.gpus, advice.after.free_nodes) == (0.0, 2)
    assert advice.reason == "2 of 2 whole nodes freed for pending gang g"


def test_advice_only_moves_pods_onto_nodes_they_may_run_on() -> None:
    advice = defrag_advice(cluster(n2_taint=True))
    assert advice.drain == ("n1",)
    assert advice.moves[0] == Move("a", 2, "n1", "n4")
    assert advice.reason == "1 of 2 whole nodes freed for pending gang g"
    tolerant = Workload(
        tuple(
            j
            if j.name != "a"
            else JobSummary(
                "train", "a", 1, 2, "running", tolerations=(Toleration("dedicated", "Equal", "infer"),), nodes=("n1",)
            )
            for j in cluster(True).jobs
        ),
        cluster(True).nodes,
    )
    assert defrag_advice(tolerant).moves[0] == Move("a", 2, "n1", "n2")


def test_no_advice_when_no_whole_node_gang_waits() -> None:
    workload = Workload(cluster().jobs[:-1], cluster().nodes)
    advice = defrag_advice(workload)
    assert (advice.drain, advice.moves, advice.restarted_gpus) == ((), (), 0)
    assert advice.reason == "no pending whole-node gang waits on fragmentation"
    assert defrag_advice(workload, nodes_wanted=1).drain == ("n1",)


def pod(
    name: str, gpus: int, *, phase: str = "Running", node: str | None = "n1", group: str = "pg", **spec: Any
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": {"volcano.sh/queue-name": "train"},
            "annotations": {"scheduling.k8s.io/group-name": group, "gpu-capacity-predictor/recurring": "true"},
        },
        "spec": {
            "nodeName": node,
            "priority": 1000,
            "containers": [{"resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}],
            **spec,
        },
        "status": {"phase": phase},
    }


def node(name: str, gpus: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"gpu": "a100"}},
        "spec": spec,
        "status": {"allocatable": {"nvidia.com/gpu": gpus}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_workload_from_the_pod_and_node_lists() -> None:
    pods = {
        "items": [
            pod("w-0", 4),
            pod("w-1", 4, node="n2"),
            pod("p-0", 8, phase="Pending", node=None, group="p", tolerations=[{"operator": "Exists"}]),
            pod("done", 8, phase="Succeeded"),
            pod("cpu", 0),
        ]
    }
    nodes = {
        "items": [
            node("n1", "8"),
            node("n2", "8", taints=[{"key": "k", "effect": "NoSchedule"}]),
            node("off", "8", unschedulable=True),
            {"metadata": {"name": "cpu"}, "status": {}},
        ]
    }
    workload = workload_from_objects(pods, nodes)
    assert [(j.name, j.pods, j.gpus_per_pod, j.phase, j.recurring, j.priority, j.nodes) for j in workload.jobs] == [
        ("ml/p", 1, 8, "pending", True, 1000, ()),
        ("ml/pg", 2, 4, "running", True, 1000, ("n1", "n2")),
    ]
    assert workload.jobs[0].tolerations == (Toleration(operator="Exists"),)
    assert [(n.name, n.gpus, n.used, n.taints) for n in workload.nodes] == [
        ("n1", 8, 4, ()),
        ("n2", 8, 4, (Taint("k", "", "NoSchedule"),)),
        ("off", 0, 0, ()),
    ]
    with pytest.raises(InputError, match="live pods: expected a List"):
        workload_from_objects("nope", nodes)
    with pytest.raises(InputError, match=r"pod 'w-0' nvidia\.com/gpu"):
        workload_from_objects({"items": [pod("w-0", -1)]}, nodes)


def test_the_node_size_is_read_from_the_nodes_so_whole_nodes_mean_the_cluster_s_nodes() -> None:
    four = {"items": [node(f"n{i}", "4") for i in range(3)] + [node("big", "8"), node("off", "4", unschedulable=True)]}
    pods = {"items": [pod("w-0", 4, node="n0"), pod("w-1", 4, phase="Pending", node=None, group="q")]}
    workload = workload_from_objects(pods, four)
    assert workload.gpus_per_node == 4  # three 4-GPU nodes outvote one 8-GPU node; the cordoned one has no vote
    assert defrag_advice(workload).reason == "no pending whole-node gang waits on fragmentation"  # n1, n2 free
    assert workload_from_objects(pods, four, gpus_per_node=8).gpus_per_node == 8  # an explicit size wins
    assert node_size([]) == 8 and node_size([NodeSummary("a", 2), NodeSummary("b", 4)]) == 4  # tie: the larger
