"""The demo's cluster: demand close to capacity under quotas set by hand long ago, the case the product is for.

Jobs are drawn from distributions fitted to Microsoft Philly (``predictor.sim.synthetic_jobs``, recurring
workloads so right-sizing has history), with run times stretched so that a few jobs an hour keep the cluster
about three-quarters busy (a 2-core machine simulates five weeks of them in about a minute; Philly's own
arrival rate would need hundreds of jobs an hour for the same load). The quotas are static and hard
(capability = deserved, no borrowing): the busy teams' quotas cover their mean demand but not their daily
peak, so their jobs wait every afternoon while the quiet teams' quotas sit idle.
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
PEAK_SHORT = 1.2  # a busy team's hand-set quota over its mean demand: short at the daily peak


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
    """Static hard quotas (capability = deserved, what a team sets by hand): the busier half of the teams get a
    fifth above their mean demand (enough on average, not at the daily peak), the quieter half split the rest
    evenly and leave most of it idle; Σ deserved ≤ the cluster."""
    span_h = max(1.0, (jobs["submit"].max() - jobs["submit"].min()).total_seconds() / 3600)
    gpu_h = (jobs["num_gpus"] * jobs["duration_s"] / 3600).groupby(jobs["queue"].astype(str)).sum()
    mean = (gpu_h / span_h).sort_values(ascending=False, kind="stable")
    busy = list(mean.index[: math.ceil(len(mean) / 2)])
    quiet = [str(q) for q in mean.index if q not in busy]
    wanted = {str(q): max(1.0, math.floor(PEAK_SHORT * float(mean[q]))) for q in busy}
    scale = min(1.0, (total_gpus - len(quiet)) / sum(wanted.values()))
    deserved = {q: max(1.0, math.floor(v * scale)) for q, v in wanted.items()}
    rest = max(0.0, total_gpus - sum(deserved.values()))
    deserved |= {q: max(1.0, math.floor(rest / len(quiet))) for q in quiet}
    return [QueueSpec(q, deserved=d, capability=d) for q, d in deserved.items()]
