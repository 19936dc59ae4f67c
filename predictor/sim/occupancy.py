"""Who holds which GPU at each sample time: the matrices every per-GPU and per-node metric derives from.

Built once per run as dense ``[gpu, step]`` arrays (int32/bool, ~130 MB for 512 GPUs × 5 weeks at 1 min)
so metric families are numpy expressions over them instead of per-sample Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from predictor.sim.cluster import ClusterSpec
from predictor.sim.faults import FaultPlan
from predictor.sim.profiles import UsageProfiles
from predictor.sim.series import StepGrid, epoch_s

__all__ = ["ABSENT", "IDLE", "Occupancy", "build_occupancy"]

IDLE = -1
ABSENT = -2  # node not ready: its exporters are not scraped, the series go stale


@dataclass
class Occupancy:
    grid: StepGrid
    cluster: ClusterSpec
    owner: np.ndarray  # [gpus, steps] int32 attempt id, IDLE or ABSENT
    busy: np.ndarray  # [gpus, steps] bool: the job really uses this GPU
    attempt_job: np.ndarray  # attempt id → job index
    attempt_gpus: list[np.ndarray]
    attempts: pd.DataFrame
    jobs: pd.DataFrame
    profiles: UsageProfiles
    node_ready: np.ndarray  # [nodes, steps] bool
    faults: list[FaultPlan]
    seed: int

    def job_of(self, owner: np.ndarray) -> np.ndarray:
        """Job index for each owner cell (0 where idle/absent: mask with ``owner >= 0``)."""
        return np.asarray(self.attempt_job[np.maximum(owner, 0)])

    def node_view(self, matrix: np.ndarray) -> np.ndarray:
        """``[gpus, steps]`` → ``[nodes, gpus_per_node, steps]`` without copying."""
        return matrix.reshape(self.cluster.n_nodes, self.cluster.gpus_per_node, -1)


def build_occupancy(
    grid: StepGrid,
    cluster: ClusterSpec,
    attempts: pd.DataFrame,
    attempt_gpus: list[np.ndarray],
    jobs: pd.DataFrame,
    profiles: UsageProfiles,
    faults: list[FaultPlan],
    seed: int,
) -> Occupancy:
    owner = np.full((cluster.n_gpus, grid.n_steps), IDLE, dtype=np.int32)
    busy = np.zeros((cluster.n_gpus, grid.n_steps), dtype=bool)
    start = epoch_s(attempts["start"])
    end = epoch_s(attempts["end"])
    job = attempts["job_index"].to_numpy().astype(np.int64)
    for a in range(len(attempts)):
        k0, k1 = grid.step_range(start[a], end[a])
        if k1 <= k0:
            continue
        gpus = attempt_gpus[a]
        owner[gpus, k0:k1] = a
        busy[gpus[: int(profiles.gpus_used[job[a]])], k0:k1] = True
    node_ready = np.ones((cluster.n_nodes, grid.n_steps), dtype=bool)
    g = cluster.gpus_per_node
    for fault in faults:
        if fault.cause == "node_not_ready":
            k0, k1 = fault.steps(grid)
            node_ready[fault.node, k0:k1] = False
            owner[fault.node * g : (fault.node + 1) * g, k0:k1] = ABSENT
            busy[fault.node * g : (fault.node + 1) * g, k0:k1] = False
    return Occupancy(
        grid=grid,
        cluster=cluster,
        owner=owner,
        busy=busy,
        attempt_job=job,
        attempt_gpus=attempt_gpus,
        attempts=attempts,
        jobs=jobs,
        profiles=profiles,
        node_ready=node_ready,
        faults=faults,
        seed=seed,
    )
