"""The workload read from kube-state-metrics series (the loop's Prometheus-only path)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from models.frames import ID, TIME, VALUE
from predictor.config import PrometheusSettings
from predictor.errors import InputError
from predictor.loop import SourceWorkload
from predictor.planner.gangs import pool_gpus
from predictor.planner.workload import Taint, Toleration
from predictor.planner.workload_ksm import workload_from_ksm
from predictor.sources import PrometheusSource
from predictor.sources.queries import WORKLOAD
from tests.support.localprom import LocalPrometheus

NOW = pd.Timestamp("2026-11-02T10:00:00Z")


def family(*series: dict[str, Any]) -> pd.DataFrame:
    rows = [{ID: repr(sorted(s.items())), TIME: NOW, VALUE: float(s.pop("value", 1.0)), **s} for s in series]
    return pd.DataFrame(rows)


FRAMES = {
    "pod_gpus": family(
        {"namespace": "ml", "pod": "w-0", "node": "n1", "value": 4},
        {"namespace": "ml", "pod": "w-1", "node": "n2", "value": 4},
        {"namespace": "ml", "pod": "big-0", "node": "", "value": 8},
        {"namespace": "ml", "pod": "gone", "node": "n1", "value": 8},
    ),
    "pod_phase": family(
        {"namespace": "ml", "pod": "w-0", "phase": "Running"},
        {"namespace": "ml", "pod": "w-1", "phase": "Running"},
        {"namespace": "ml", "pod": "big-0", "phase": "Pending"},
    ),
    "pod_labels": family(
        *(
            {"namespace": "ml", "pod": p, "label_volcano_sh_queue_name": "train", "label_volcano_sh_job_name": j}
            for p, j in (("w-0", "w"), ("w-1", "w"), ("big-0", "big"))
        )
    ),
    "pod_annotations": family(
        {"namespace": "ml", "pod": "big-0", "annotation_gpu_capacity_predictor_recurring": "true"}
    ),
    "pod_tolerations": family(
        {
            "namespace": "ml",
            "pod": "big-0",
            "key": "dedicated",
            "operator": "Equal",
            "toleration_value": "train",
            "effect": "NoSchedule",
        }
    ),
    "pod_nodeselectors": family({"namespace": "ml", "pod": "big-0", "nodeselector_gpu_vendor_type": "a100"}),
    "node_gpus": family(*({"node": n, "value": 8} for n in ("n1", "n2", "n3", "n4"))),
    "node_taints": family({"node": "n3", "key": "dedicated", "taint_value": "train", "effect": "NoSchedule"}),
    "node_labels": family(
        {"node": "n3", "label_gpu_vendor_type": "a100"}, {"node": "n4", "label_gpu_vendor_type": "h100"}
    ),
    "node_unschedulable": family(),
    "node_not_ready": family({"node": "n2", "value": 0}),
}


def test_gangs_pools_and_nodes_from_kube_state_metrics() -> None:
    workload = workload_from_ksm(FRAMES)
    assert [(j.name, j.pods, j.gpus_per_pod, j.phase, j.recurring, j.priority, j.nodes) for j in workload.jobs] == [
        ("ml/big", 1, 8, "pending", True, None, ()),
        ("ml/w", 2, 4, "running", False, None, ("n1", "n2")),
    ]
    big = workload.jobs[0]
    assert big.tolerations == (Toleration("dedicated", "Equal", "train", "NoSchedule"),)
    assert big.node_selector == (("gpu_vendor_type", "a100"),)
    assert [(n.name, n.gpus, n.used) for n in workload.nodes] == [
        ("n1", 8, 4),
        ("n2", 0, 0),
        ("n3", 8, 0),
        ("n4", 8, 0),
    ]
    assert workload.nodes[2].taints == (Taint("dedicated", "train", "NoSchedule"),)
    assert pool_gpus([big], workload) == 8.0  # only n3: a100 and the tolerated taint


def test_nan_infinite_or_absurd_gpu_samples_make_the_workload_unknown() -> None:
    """Prometheus returns NaN and ±Inf samples as such: a GPU count that is not one is an InputError (the loop
    then plans without job data) instead of a ValueError crash, or 1e300 GPUs becoming a
    capability floor; a finished pod's sample is not read at all."""
    for bad in (float("nan"), float("inf"), 1e300):
        pods = family(*({"namespace": "ml", "pod": p, "node": "n1", "value": v} for p, v in (("w-0", bad), ("w-1", 4))))
        with pytest.raises(InputError, match=r"pod ml/w-0 has .* GPUs"):
            workload_from_ksm({**FRAMES, "pod_gpus": pods})
        with pytest.raises(InputError, match=r"node n1 has .* GPUs"):
            workload_from_ksm({**FRAMES, "node_gpus": family({"node": "n1", "value": bad})})
    finished = family(
        {"namespace": "ml", "pod": "gone", "node": "n1", "value": float("nan")},
        {"namespace": "ml", "pod": "w-0", "node": "n1", "value": 4},
    )
    workload = workload_from_ksm({**FRAMES, "pod_gpus": finished})
    assert workload is not None and [j.name for j in workload.jobs] == ["ml/w"]


class Recording:
    def __init__(self, frames: dict[str, pd.DataFrame]) -> None:
        self.by_query = {WORKLOAD[name]: frame for name, frame in frames.items()}
        self.asked: list[str] = []

    def query_range(self, query: str, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta) -> pd.DataFrame:
        self.asked.append(query)
        return self.by_query.get(query, pd.DataFrame(columns=[ID, TIME, VALUE]))


def test_the_loop_reader_asks_every_family_once_and_treats_no_metrics_as_unknown() -> None:
    source = Recording(FRAMES)
    workload = SourceWorkload(source).workload(NOW)
    assert workload is not None and len(workload.jobs) == 2
    assert sorted(source.asked) == sorted(WORKLOAD.values())
    assert SourceWorkload(Recording({})).workload(NOW) is None


def _openmetrics(path: Path) -> None:
    """The families of ``FRAMES`` as kube-state-metrics exports them (raw names, a ``value`` label), 3 samples."""
    ready = [("n1", 1), ("n2", 0), ("n3", 1), ("n4", 1)]
    series: dict[str, list[tuple[str, float]]] = {
        "kube_pod_container_resource_requests": [
            (f'namespace="ml",pod="{p}",container="c",node="{n}",resource="nvidia_com_gpu",unit="integer"', g)
            for p, n, g in (("w-0", "n1", 4), ("w-1", "n2", 4), ("big-0", "", 8), ("gone", "n1", 8))
        ],
        "kube_pod_status_phase": [
            (f'namespace="ml",pod="{p}",phase="{ph}"', float(ph == cur))
            for p, cur in (("w-0", "Running"), ("w-1", "Running"), ("big-0", "Pending"), ("gone", "Succeeded"))
            for ph in ("Pending", "Running", "Succeeded")
        ],
        "kube_pod_labels": [
            (f'namespace="ml",pod="{p}",label_volcano_sh_queue_name="train",label_volcano_sh_job_name="{j}"', 1)
            for p, j in (("w-0", "w"), ("w-1", "w"), ("big-0", "big"), ("gone", "gone"))
        ],
        "kube_pod_annotations": [('namespace="ml",pod="big-0",annotation_gpu_capacity_predictor_recurring="true"', 1)],
        "kube_pod_tolerations": [
            ('namespace="ml",pod="big-0",key="dedicated",operator="Equal",value="train",effect="NoSchedule"', 1)
        ],
        "kube_pod_nodeselectors": [('namespace="ml",pod="big-0",nodeselector_gpu_vendor_type="a100"', 1)],
        "kube_node_status_allocatable": [
            (f'node="n{i}",resource="nvidia_com_gpu",unit="integer"', 8) for i in range(1, 5)
        ],
        "kube_node_spec_taint": [('node="n3",key="dedicated",value="train",effect="NoSchedule"', 1)],
        "kube_node_labels": [
            ('node="n3",label_gpu_vendor_type="a100"', 1),
            ('node="n4",label_gpu_vendor_type="h100"', 1),
        ],
        "kube_node_spec_unschedulable": [(f'node="n{i}"', 0) for i in range(1, 5)],
        "kube_node_status_condition": [(f'node="{n}",condition="Ready",status="true"', r) for n, r in ready],
    }
    lines = []
    for name, rows in series.items():
        lines.append(f"# TYPE {name} gauge")
        lines += [
            f"{name}{{{labels}}} {value:g} {NOW.timestamp() - lag:.0f}"
            for labels, value in rows
            for lag in (120, 60, 0)
        ]
    path.write_text("\n".join([*lines, "# EOF", ""]), encoding="utf-8")


def test_the_workload_queries_read_the_same_workload_from_a_real_prometheus(
    tmp_path: Path, prometheus_from_openmetrics: Callable[[Path], LocalPrometheus]
) -> None:
    _openmetrics(tmp_path / "ksm.om")
    prom = prometheus_from_openmetrics(tmp_path / "ksm.om")
    source = PrometheusSource(PrometheusSettings(url=prom.url))  # type: ignore[call-arg]
    assert SourceWorkload(source).workload(NOW) == workload_from_ksm(FRAMES)
