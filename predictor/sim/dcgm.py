"""DCGM-exporter series per GPU, labelled with the pod that holds the GPU at each sample.

A GPU's label set changes when its pod changes (``pod=""`` while idle, as dcgm-exporter does with
``DCGM_EXPORTER_KUBERNETES=true``), so one physical GPU becomes several Prometheus series; the layout of
those series is computed once and shared by every family. Utilisation is generated first and every
other family (power, temperature, clocks, NVLink traffic) derives from it, so the metrics of one GPU
stay physically consistent, faults included.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from functools import cached_property

import numpy as np

from predictor.sim.effects import THROTTLE_IDLE, apply_gpu_effects
from predictor.sim.occupancy import ABSENT, IDLE, Occupancy
from predictor.sim.series import Family, Series

__all__ = ["DcgmGenerator", "pod_name"]

_NS = uuid.UUID("6b3f2a52-4d0e-4a43-9e63-3c1d2f0a9b11")
_FB_RESERVED_MIB = 585


def pod_name(job_id: str, rank: int) -> str:
    return f"job-{job_id}-worker-{rank}"


class DcgmGenerator:
    """Builds the DCGM families of one run from its occupancy."""

    def __init__(self, occ: Occupancy) -> None:
        self.o = occ
        c = occ.cluster
        types = c.node_types()
        per_gpu = [t for t in types for _ in range(c.gpus_per_node)]
        self.memory_mib = np.array([t.memory_mib for t in per_gpu], dtype=np.float32)
        self.power_limit = np.array([t.power_limit_w for t in per_gpu], dtype=np.float32)
        self.idle_power = np.array([t.idle_power_w for t in per_gpu], dtype=np.float32)
        self.max_clock = np.array([t.max_sm_clock_mhz for t in per_gpu], dtype=np.float32)
        self.idle_clock = np.array([t.idle_sm_clock_mhz for t in per_gpu], dtype=np.float32)
        names = c.node_names()
        self.gpu_labels = []
        for gi in range(c.n_gpus):
            node, idx = divmod(gi, c.gpus_per_node)
            self.gpu_labels.append(
                {
                    "gpu": str(idx),
                    "UUID": f"GPU-{uuid.uuid5(_NS, f'{names[node]}/{idx}')}",
                    "device": f"nvidia{idx}",
                    "modelName": per_gpu[gi].model_name,
                    "Hostname": names[node],
                }
            )
        self._extra = {"power_limit": self.power_limit, "memory_mib": self.memory_mib}

    def _rng(self, name: str) -> np.random.Generator:
        return np.random.default_rng([self.o.seed, 0xDC6, sum(name.encode()) * 131 + len(name)])

    # ------------------------------------------------------------------ layout
    @cached_property
    def layout(self) -> list[list[tuple[dict[str, str], np.ndarray]]]:
        """Per GPU: (labels, step indices) of each series, idle and pod series alike."""
        o = self.o
        jobs_id = o.jobs["job_id"].to_numpy()
        queues = o.jobs["queue"].to_numpy()
        g = o.cluster.gpus_per_node
        out = []
        for gi in range(o.cluster.n_gpus):
            row = o.owner[gi]
            order = np.argsort(row, kind="stable").astype(np.int32)
            sorted_row = row[order]
            cuts = np.flatnonzero(np.diff(sorted_row)) + 1
            series = []
            for steps in np.split(order, cuts):
                if len(steps) == 0:
                    continue
                a = int(row[steps[0]])
                if a == ABSENT:
                    continue
                labels = dict(self.gpu_labels[gi])
                if a == IDLE:
                    labels.update(namespace="", pod="", container="")
                else:
                    job = int(o.attempt_job[a])
                    nodes = np.unique(o.attempt_gpus[a] // g)
                    rank = int(np.searchsorted(nodes, gi // g))
                    labels.update(namespace=str(queues[job]), pod=pod_name(str(jobs_id[job]), rank), container="main")
                series.append((labels, steps))
            out.append(series)
        return out

    # ------------------------------------------------------------------ matrices
    @cached_property
    def util(self) -> np.ndarray:
        o = self.o
        rng = self._rng("util")
        job = o.job_of(o.owner)
        level = o.profiles.util_mean.astype(np.float32)[job]
        sd = o.profiles.util_sd.astype(np.float32)[job]
        noise = rng.standard_normal(o.owner.shape, dtype=np.float32)
        u = np.where(o.busy, np.clip(level + sd * noise, 0, 100), np.float32(0))
        del level, sd, noise, job
        apply_gpu_effects("util", u, o, self._extra)
        return u

    def matrix(self, name: str) -> np.ndarray:
        """The ``[gpu, step]`` matrix of quantity ``name`` (temp, clock, throttle, xid...), faults applied."""
        o = self.o
        u = self.util
        rng = self._rng(name)
        shape = u.shape
        if name == "temp":
            ambient = rng.normal(0, 2.0, (shape[0], 1)).astype(np.float32)
            m = 31 + ambient + 0.4 * u + rng.normal(0, 1.0, shape).astype(np.float32)
        elif name == "power":
            lim, idle = self.power_limit[:, None], self.idle_power[:, None]
            m = idle + (lim - idle) * (u / 100) * 0.9 + rng.normal(0, 4.0, shape).astype(np.float32)
            m = np.clip(m, idle * 0.9, lim)
        elif name == "clock":
            jitter = np.abs(rng.normal(0, 15, shape)).astype(np.float32)
            m = np.where(u > 3, self.max_clock[:, None] - jitter, self.idle_clock[:, None])
        elif name == "throttle":
            m = np.where(u < 1, np.float32(THROTTLE_IDLE), np.float32(0))
        elif name == "xid":
            m = np.zeros(shape, dtype=np.float32)
        elif name == "fb_used":
            job = o.job_of(o.owner)
            frac = o.profiles.mem_frac.astype(np.float32)[job]
            m = np.where(o.busy, frac * self.memory_mib[:, None], np.float32(0))
            m *= 1 + rng.normal(0, 0.005, shape).astype(np.float32)
        elif name in ("nvlink_rate", "crc_rate", "ecc_dbe_rate", "nvlink_replay_rate", "nvlink_recovery_rate"):
            if name == "nvlink_rate":
                job = o.job_of(o.owner)
                multi = (o.jobs["num_gpus"].to_numpy() > 1)[job] & o.busy
                m = np.where(multi, u / 100 * 6e9, np.float32(0)).astype(np.float32)
            else:
                m = np.zeros(shape, dtype=np.float32)
        else:
            raise KeyError(name)
        m = m.astype(np.float32, copy=False)
        apply_gpu_effects(name, m, o, self._extra)
        if name == "clock":  # clocks never drop below idle, whatever the throttling
            np.maximum(m, self.idle_clock[:, None], out=m)
        return m

    def _counter(self, rate_name: str) -> np.ndarray:
        rate = self.matrix(rate_name).astype(np.float64) * self.o.grid.step_s
        offset = self._rng(rate_name + "0").uniform(0, 1e6, (rate.shape[0], 1)) if rate_name == "nvlink_rate" else 0.0
        return np.floor(np.cumsum(rate, axis=1) + offset)

    # ------------------------------------------------------------------ families
    def _family(
        self, name: str, help_: str, make: Callable[[], np.ndarray], kind: str = "gauge", decimals: int = 0
    ) -> Family:
        def series() -> Iterator[Series]:
            m = make()
            for gi, per_gpu in enumerate(self.layout):
                row = m[gi]
                for labels, steps in per_gpu:
                    yield labels, steps, row[steps].astype(np.float64)

        return Family(name, kind, help_, series, decimals)  # type: ignore[arg-type]

    def families(self) -> list[Family]:
        mem = self.memory_mib[:, None]
        f = self._family
        return [
            f("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda: np.rint(self.util)),
            f("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", lambda: np.rint(self.matrix("fb_used"))),
            f(
                "DCGM_FI_DEV_FB_FREE",
                "Framebuffer memory free (in MiB).",
                lambda: np.maximum(mem - _FB_RESERVED_MIB - np.rint(self.matrix("fb_used")), 0),
            ),
            f("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", lambda: self.matrix("power"), decimals=3),
            f("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", lambda: np.rint(self.matrix("temp"))),
            f("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", lambda: np.rint(self.matrix("clock"))),
            f("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", lambda: self.matrix("xid")),
            f(
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                "Ratio of time the graphics engine is active.",
                lambda: self.util / 100 * 0.97,
                decimals=4,
            ),
            f(
                "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
                "Current clock throttle reasons (bitmask).",
                lambda: self.matrix("throttle"),
            ),
            f(
                "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
                "Total number of NVLink bandwidth counters for all lanes.",
                lambda: self._counter("nvlink_rate"),
                kind="counter",
            ),
            f(
                "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
                "Total number of NVLink flow-control CRC errors.",
                lambda: self._counter("crc_rate"),
                kind="counter",
            ),
            f(
                "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
                "Total number of double-bit volatile ECC errors.",
                lambda: self._counter("ecc_dbe_rate"),
                kind="counter",
            ),
            f(
                "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
                "Total number of NVLink retries.",
                lambda: self._counter("nvlink_replay_rate"),
                kind="counter",
            ),
            f(
                "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
                "Total number of NVLink recovery errors.",
                lambda: self._counter("nvlink_recovery_rate"),
                kind="counter",
            ),
        ]
