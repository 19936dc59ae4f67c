"""Per-job usage profiles: how much of what a job asked for it really uses.

Right-sizing learns from the gap between request and use, so the profiles deliberately include waste:
some jobs leave GPUs idle, many use a fraction of GPU memory, utilisation levels are spread the way
training clusters report them (a mode near 80–95 %, a long low tail of debugging and data-bound jobs).
Drawn once per job from the seed, so every metric family sees the same job behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["UsageProfiles", "draw_profiles"]


@dataclass(frozen=True)
class UsageProfiles:
    """Arrays indexed by job index (row of the scheduler's job table)."""

    gpus_used: np.ndarray  # GPUs really busy (<= num_gpus)
    util_mean: np.ndarray  # SM utilisation level of a busy GPU, %
    util_sd: np.ndarray  # step-to-step noise, % points
    mem_frac: np.ndarray  # fraction of GPU memory used on busy GPUs
    net_gbps_per_gpu: np.ndarray  # kernel-path network per busy GPU, bytes/s (multi-node jobs)
    iowait_frac: np.ndarray  # CPU iowait fraction caused by data loading
    cpu_user_frac: np.ndarray  # CPU user fraction

    def as_frame(self, jobs: pd.DataFrame) -> pd.DataFrame:
        """Ground truth per job, for right-sizing training and tests."""
        return pd.DataFrame(
            {
                "job_id": jobs["job_id"].to_numpy(),
                "queue": jobs["queue"].to_numpy(),
                "num_gpus": jobs["num_gpus"].to_numpy(),
                "gpus_used": self.gpus_used,
                "util_mean": self.util_mean,
                "mem_frac": self.mem_frac,
                "net_bytes_per_s_per_gpu": self.net_gbps_per_gpu,
            }
        )


def draw_profiles(jobs: pd.DataFrame, gpus_per_node: int, seed: int) -> UsageProfiles:
    """Draw one profile per job (deterministic for ``seed``); runs of one workload share a template."""
    if "workload" in jobs.columns:
        return _recurring_profiles(jobs, gpus_per_node, seed)
    rng = np.random.default_rng([seed, 0x5EED])
    n = len(jobs)
    gpus = jobs["num_gpus"].to_numpy().astype(np.int64)
    # ~20 % of multi-GPU jobs use only part of what they ask for (a half, a quarter, or one GPU).
    divisor = rng.choice([1, 2, 4, 8], size=n, p=[0.8, 0.1, 0.05, 0.05])
    used = np.maximum(1, gpus // divisor)
    # Utilisation: mostly busy training, a low tail of interactive/debug/data-bound jobs.
    kind = rng.random(n)
    util = np.where(
        kind < 0.65,
        rng.uniform(75, 97, n),
        np.where(kind < 0.9, rng.uniform(35, 75, n), rng.uniform(2, 30, n)),
    )
    sd = rng.uniform(2, 8, n)
    mem = np.clip(rng.beta(2.2, 2.0, n), 0.04, 0.92)
    multi_node = gpus > gpus_per_node
    # Kernel-path traffic only (NCCL over sockets, data loading): RDMA/InfiniBand never shows up in
    # node_network_*, so even multi-node jobs stay at a few Gbit/s per GPU here.
    net = np.where(multi_node, rng.uniform(0.05e9, 0.3e9, n), rng.uniform(1e6, 3e7, n))
    iowait = rng.uniform(0.005, 0.04, n)
    cpu_user = rng.uniform(0.1, 0.45, n)
    return UsageProfiles(
        gpus_used=used,
        util_mean=util,
        util_sd=sd,
        mem_frac=mem,
        net_gbps_per_gpu=net,
        iowait_frac=iowait,
        cpu_user_frac=cpu_user,
    )


def _recurring_profiles(jobs: pd.DataFrame, gpus_per_node: int, seed: int) -> UsageProfiles:
    """Runs of one workload behave alike: a template per workload (busy-GPU share, utilisation level,
    memory) with small per-run jitter; one workload in six grows its memory run after run (a dataset or
    model that keeps getting bigger), the case a percentile of past runs under-sizes."""
    codes, names = pd.factorize(jobs["workload"].astype(str), sort=True)
    first = pd.Series(np.arange(len(jobs))).groupby(codes).first().to_numpy()
    template = draw_profiles(jobs.drop(columns="workload").iloc[first].reset_index(drop=True), gpus_per_node, seed)
    rng = np.random.default_rng([seed, 0x12EC])
    n = len(jobs)
    gpus = jobs["num_gpus"].to_numpy().astype(np.int64)
    divisor = rng.choice([1, 2, 4, 8], size=len(names), p=[0.8, 0.1, 0.05, 0.05])[codes]
    util = np.clip(template.util_mean[codes] + rng.normal(0, 3, n), 1, 99)
    growth = (rng.random(len(names)) < 1 / 6) * rng.uniform(0.005, 0.02, len(names))
    run_number = jobs.groupby(codes).cumcount().to_numpy()
    mem = np.clip(template.mem_frac[codes] * (1 + growth[codes] * run_number) + rng.normal(0, 0.02, n), 0.04, 0.97)
    return UsageProfiles(
        gpus_used=np.maximum(1, gpus // divisor),
        util_mean=util,
        util_sd=template.util_sd[codes],
        mem_frac=mem,
        net_gbps_per_gpu=template.net_gbps_per_gpu[codes],
        iowait_frac=template.iowait_frac[codes],
        cpu_user_frac=template.cpu_user_frac[codes],
    )
