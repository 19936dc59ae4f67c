"""What the simulated cluster is made of: node pools of GPU types and Volcano-like queues with quotas.

Kept apart from the scheduler so a what-if run can swap the quota policy (static table, a schedule that
changes over time, or a callback from the planner) without touching how jobs are placed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

from predictor.bounds import MAX_GPUS
from predictor.errors import InputError

__all__ = [
    "GPU_TYPES",
    "ClusterSpec",
    "GpuType",
    "QueueSpec",
    "Quota",
    "QuotaChange",
    "default_queues",
    "parse_gpu_types",
    "queues_from_frame",
    "quota_schedule_from_frame",
]


@dataclass(frozen=True)
class GpuType:
    """Physical constants of one GPU model, used to shape its metrics (MiB, W, MHz as DCGM reports them)."""

    name: str
    model_name: str
    memory_mib: int
    power_limit_w: float
    idle_power_w: float
    max_sm_clock_mhz: float
    idle_sm_clock_mhz: float = 345.0


GPU_TYPES: dict[str, GpuType] = {
    "H100": GpuType("H100", "NVIDIA H100 80GB HBM3", 81559, 700.0, 70.0, 1980.0),
    "A100": GpuType("A100", "NVIDIA A100-SXM4-80GB", 81920, 400.0, 55.0, 1410.0),
    "V100": GpuType("V100", "Tesla V100-SXM2-32GB", 32768, 300.0, 40.0, 1530.0),
}


@dataclass(frozen=True)
class ClusterSpec:
    """Node pools: ``pools`` maps a GPU type name to a node count; every node has ``gpus_per_node``."""

    pools: tuple[tuple[str, int], ...] = (("H100", 64),)
    gpus_per_node: int = 8

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1:
            raise InputError(f"gpus_per_node must be >= 1, got {self.gpus_per_node}")
        if not self.pools or any(count < 1 for _, count in self.pools):
            raise InputError("every node pool needs at least one node")
        total = sum(count for _, count in self.pools) * self.gpus_per_node
        if total > MAX_GPUS:
            raise InputError(f"a cluster of {total} GPUs (nodes × GPUs per node) is above {MAX_GPUS:g} GPUs")
        unknown = [name for name, _ in self.pools if name not in GPU_TYPES]
        if unknown:
            raise InputError(f"unknown GPU type {unknown[0]!r} (known: {', '.join(GPU_TYPES)})")

    @classmethod
    def uniform(cls, nodes: int, gpu_type: str = "H100", gpus_per_node: int = 8) -> ClusterSpec:
        return cls(pools=((gpu_type, nodes),), gpus_per_node=gpus_per_node)

    @property
    def n_nodes(self) -> int:
        return sum(count for _, count in self.pools)

    @property
    def n_gpus(self) -> int:
        return self.n_nodes * self.gpus_per_node

    def node_names(self) -> list[str]:
        return [f"node-{i:03d}" for i in range(self.n_nodes)]

    def node_types(self) -> list[GpuType]:
        return [GPU_TYPES[name] for name, count in self.pools for _ in range(count)]

    def gpu_type_index(self) -> np.ndarray:
        """Per GPU (node-major), the index of its pool."""
        per_node = np.repeat(np.arange(len(self.pools)), [count for _, count in self.pools])
        return np.repeat(per_node, self.gpus_per_node)


def parse_gpu_types(text: str, nodes: int) -> ClusterSpec:
    """``"H100"`` (all nodes) or ``"H100:48,A100:16"`` (pools; counts must add up to ``nodes``)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if len(parts) == 1 and ":" not in parts[0]:
        return ClusterSpec.uniform(nodes, parts[0].upper())
    pools: list[tuple[str, int]] = []
    for part in parts:
        name, _, count = part.partition(":")
        if not count.isdigit():
            raise InputError(f"--gpu-types: {part!r} is not TYPE:COUNT")
        pools.append((name.strip().upper(), int(count)))
    if sum(c for _, c in pools) != nodes:
        raise InputError(f"--gpu-types: pool sizes add up to {sum(c for _, c in pools)}, not --nodes {nodes}")
    return ClusterSpec(pools=tuple(pools))


@dataclass
class QueueSpec:
    """A Volcano queue: ``deserved`` orders sharing (capacity plugin), ``capability`` is the hard cap (GPUs).

    ``guarantee`` is reserved for the queue (others' real capability excludes it; reclaim never takes the
    queue below it); ``reclaimable`` (Volcano's default true) lets reclaim evict its gangs above deserved;
    ``priority`` orders queues as victims (lower gives first).
    """

    name: str
    weight: int = 1
    deserved: float = 0.0
    capability: float = math.inf
    guarantee: float = 0.0
    reclaimable: bool = True
    priority: int = 0

    def __post_init__(self) -> None:
        if not (0 <= self.guarantee <= self.deserved <= self.capability):
            raise InputError(
                f"queue {self.name!r}: need 0 <= guarantee <= deserved <= capability, got "
                f"{self.guarantee} / {self.deserved} / {self.capability}"
            )
        if self.weight < 1:
            raise InputError(f"queue {self.name!r}: weight must be >= 1, got {self.weight}")


class Quota(NamedTuple):
    """A queue's new quota in GPUs; ``None`` leaves that field as it is."""

    deserved: float | None = None
    capability: float | None = None
    guarantee: float | None = None


@dataclass(frozen=True)
class QuotaChange:
    """At ``time`` set a queue's deserved/capability (``None`` keeps the current value)."""

    time: pd.Timestamp
    queue: str
    deserved: float | None = None
    capability: float | None = None
    extra: Mapping[str, str] = field(default_factory=dict)


def default_queues(jobs: pd.DataFrame, total_gpus: int) -> list[QueueSpec]:
    """Queues weighted by each queue's share of GPU-time in the table; deserved sums to the cluster.

    Capability is the whole cluster, so idle quota can be borrowed (Volcano's capacity plugin default
    when capability is left unset).
    """
    gpu_time = (jobs["num_gpus"] * jobs["duration_s"]).groupby(jobs["queue"]).sum()
    share = gpu_time / gpu_time.sum()
    specs: list[QueueSpec] = []
    for name, frac in share.sort_values(ascending=False).items():
        deserved = max(1.0, round(float(frac) * total_gpus))
        weight = max(1, round(float(frac) * 100))
        specs.append(QueueSpec(str(name), weight=weight, deserved=deserved, capability=float(total_gpus)))
    return specs


def _float_or_inf(value: object) -> float:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return math.inf
    return float(str(value))


def queues_from_frame(frame: pd.DataFrame, source: str = "queues") -> list[QueueSpec]:
    """Queues from a table with ``queue, deserved`` and optional ``weight, capability, guarantee``."""
    for column in ("queue", "deserved"):
        if column not in frame.columns:
            raise InputError(f"{source}: missing column {column!r}")
    specs = []
    for row in frame.to_dict("records"):
        specs.append(
            QueueSpec(
                str(row["queue"]).lower(),
                weight=int(row.get("weight", 1) or 1),
                deserved=float(row["deserved"]),
                capability=_float_or_inf(row.get("capability")),
                guarantee=float(row.get("guarantee", 0.0) or 0.0),
                reclaimable=str(row.get("reclaimable", True)).strip().lower() not in ("false", "0", "no"),
            )
        )
    return specs


def quota_schedule_from_frame(frame: pd.DataFrame, source: str = "quota schedule") -> list[QuotaChange]:
    """Quota changes from a table with ``timestamp, queue`` and ``deserved`` and/or ``capability``."""
    for column in ("timestamp", "queue"):
        if column not in frame.columns:
            raise InputError(f"{source}: missing column {column!r}")
    times = pd.to_datetime(frame["timestamp"], utc=True, format="ISO8601")
    changes: list[QuotaChange] = []
    for when, row in zip(times, frame.to_dict("records"), strict=True):
        deserved = row.get("deserved")
        capability = row.get("capability")
        changes.append(
            QuotaChange(
                pd.Timestamp(when),
                str(row["queue"]).lower(),
                None if deserved is None or pd.isna(deserved) else float(deserved),
                None if capability is None or pd.isna(capability) else float(capability),
            )
        )
    return sorted(changes, key=lambda c: c.time)


def check_queues(queues: Sequence[QueueSpec], job_queues: Sequence[str]) -> None:
    """Every queue named by a job must exist."""
    known = {q.name for q in queues}
    missing = sorted(set(job_queues) - known)
    if missing:
        raise InputError(f"jobs name queue(s) not in the queue table: {', '.join(missing[:5])}")
