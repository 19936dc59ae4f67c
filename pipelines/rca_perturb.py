"""What the simulator does not draw by itself, applied to a run's window data before features are taken.

Healthy GPUs that run hot (a worse slot in the chassis: the tree must not call heat alone a fault),
CPU-hungry neighbours with no GPU effect (load alone is not ``cpu_contention``), and metric families a
cluster does not scrape, removed from the data so their features are NaN exactly as in production.
Every draw comes from the scenario's seed.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from models.rca_features import WindowData, node_of

__all__ = ["Perturbation", "perturb"]


class Perturbation(Protocol):
    """The scenario settings ``perturb`` reads (``pipelines.rca_data.Scenario`` has them)."""

    @property
    def seed(self) -> int: ...
    @property
    def hot_gpus(self) -> float: ...
    @property
    def noisy_nodes(self) -> float: ...
    @property
    def drop(self) -> tuple[str, ...]: ...


def perturb(data: WindowData, s: Perturbation) -> WindowData:
    """Hot-but-healthy GPUs, noisy neighbours and dropped families, drawn from the scenario's seed."""
    rng = np.random.default_rng([s.seed, 0x16])
    for name in s.drop:
        data.tables.pop(name, None)
    temp = data.tables.get("DCGM_FI_DEV_GPU_TEMP")
    if s.hot_gpus and temp is not None:
        gpu_keys = list(zip(node_of(temp.labels), temp.labels["gpu"].astype(str), strict=True))
        keys = sorted(set(gpu_keys))
        # In key order, not a set's: a set of strings iterates in an order that changes from one process to the
        # next (string hashing is salted), and so would which GPU gets which offset.
        hot = sorted(keys[i] for i in rng.choice(len(keys), max(1, int(s.hot_gpus * len(keys))), replace=False))
        offset = {k: rng.uniform(8, 16) for k in hot}
        for j, key in enumerate(gpu_keys):
            if key in offset:
                temp.values[:, j] += np.rint(offset[key])
    if s.noisy_nodes:
        _noisy_neighbours(data, s, rng)
    data._gpu_cache.clear()
    return data


def _noisy_neighbours(data: WindowData, s: Perturbation, rng: np.random.Generator) -> None:
    """A CPU-hungry pod shares some nodes for 30-90 min at a time: user CPU and load up, GPUs untouched."""
    load = data.tables.get("node_load1")
    cpu = data.tables.get("node_cpu_seconds_total")
    if load is None:
        return
    nodes = sorted(set(node_of(load.labels)))
    chosen = [nodes[i] for i in rng.choice(len(nodes), max(1, int(s.noisy_nodes * len(nodes))), replace=False)]
    step = float(np.median(np.diff(data.times))) / 1e9 if len(data.times) > 1 else 60.0
    for node in chosen:
        extra = np.zeros(len(data.times))
        t = int(rng.integers(0, max(len(data.times) // 4, 1)))
        while t < len(data.times):
            length = int(rng.uniform(30, 90) * 60 / step)
            extra[t : t + length] = rng.uniform(0.3, 0.6)
            t += length + int(rng.uniform(60, 240) * 60 / step)
        for table, is_load in ((load, True), (cpu, False)):
            if table is None:
                continue
            cols = list(np.flatnonzero(node_of(table.labels) == node))
            if not is_load and "mode" in table.labels.columns:
                cols = [c for c in cols if table.labels["mode"].iloc[c] == "user"]
            for c in cols:
                if is_load:
                    table.values[:, c] *= 1 + 1.5 * extra
                else:  # a counter of CPU-seconds: add the extra busy share of each step, cumulatively
                    table.values[:, c] += np.cumsum(extra * step)
