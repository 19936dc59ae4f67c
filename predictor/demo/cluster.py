"""The demo's cluster: demand close to capacity under quotas set by hand long ago, the case the product is for.

Jobs are drawn from distributions fitted to Microsoft Philly (``predictor.sim.synthetic_jobs``, recurring
workloads so right-sizing has history), with run times stretched so that a few jobs an hour keep the cluster
about three-quarters busy (a 2-core machine simulates five weeks of them in about a minute; Philly's own
arrival rate would need hundreds of jobs an hour for the same load). The quotas are static and hard
(capability = deserved, no borrowing), split as the teams' shares were when they were set: the busiest teams
of today hold the smallest quotas, so they starve while the quiet teams' quotas sit idle.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from predictor.sim import QueueSpec, synthetic_jobs

__all__ = ["demo_jobs", "hand_set_quotas"]

# Run-time stretch per 8-GPU node of the cluster, and the longest run after it (2 days, as a cluster's
# job time limit would cut it): with the demo's seed, 16 nodes see about 75 % of their GPUs asked for.
STRETCH_PER_NODE = 30 / 16
LONGEST_RUN_S = 2 * 86400.0


def demo_jobs(params: dict[str, Any], start: pd.Timestamp, warmup_days: float) -> pd.DataFrame:
    """The demo's job table: Philly-fitted arrivals and sizes, run times stretched with the cluster's size."""
    jobs = synthetic_jobs(
        start - pd.Timedelta(days=warmup_days),
        start + pd.Timedelta(weeks=params["weeks"]),
        seed=params["seed"],
        jobs_per_hour=params["jobs_per_hour"],
        workloads_per_queue=int(params.get("workloads_per_queue", 0)),
    )
    stretch = float(params.get("stretch_per_node", STRETCH_PER_NODE)) * params["nodes"]
    return jobs.assign(duration_s=(jobs["duration_s"] * stretch).clip(lower=10.0, upper=LONGEST_RUN_S).round())


def hand_set_quotas(jobs: pd.DataFrame, total_gpus: int) -> list[QueueSpec]:
    """Static hard quotas in the reverse order of today's demand: half split evenly, half by the reversed
    shares of GPU-time, capability = deserved (what a team sets by hand), Σ deserved ≤ the cluster."""
    gpu_time = (jobs["num_gpus"] * jobs["duration_s"]).groupby(jobs["queue"].astype(str)).sum()
    busiest = gpu_time.sort_values(ascending=False)
    share = busiest / busiest.sum()
    reversed_share = pd.Series(share.to_numpy()[::-1], index=share.index)
    weights = 0.5 * reversed_share + 0.5 / len(share)
    specs = []
    for name, weight in weights.items():
        deserved = max(1.0, math.floor(float(weight) / float(weights.sum()) * total_gpus))
        specs.append(QueueSpec(str(name), deserved=deserved, capability=deserved))
    return specs
