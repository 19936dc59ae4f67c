"""A synthetic trace where right-sizing has requests to change: daily jobs asking more GPUs than they use.

Neither public trace lets ``rightsize+loop`` act: Philly names no recurring job, and Alibaba's apps are not
one job run again (and no public trace pairs requests with use). Here, over the simulator's Philly-like
background jobs, a few teams run the same jobs every day (a nightly retrain, an evaluation sweep): each asks
4, 8 or 16 GPUs and keeps a half or a quarter of them busy (a ``gpus_used`` column, as a measured trace
would give). Right-sizing learns them from the warm-up week's runs, so from the window's first day their
requests can shrink; ``bench.replay`` reports how many it changed. The background jobs keep their simulated
usage profiles (drawn per seed), and none of them recurs.

``synthetic`` is the earlier synthetic trace, kept so its published figures can be reproduced: the
simulator's jobs recurring as 4 workload templates per queue, with usage drawn from the simulator's profiles
(their runs mostly keep what they ask busy, so right-sizing changes few requests there).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.replay_traces import WEEK, Trace
from predictor.sim import normalise_jobs, synthetic_jobs

__all__ = ["daily_jobs", "recurring", "synthetic"]

BEGIN = pd.Timestamp("2026-01-05T00:00Z")


def daily_jobs(
    start: pd.Timestamp, end: pd.Timestamp, queues: list[str], *, per_queue: int = 2, seed: int = 0
) -> pd.DataFrame:
    """Jobs re-run every day in ``[start, end)``: ``per_queue`` workloads per queue, each with a fixed
    request (4, 8 or 16 GPUs), GPUs kept busy (a half or a quarter of it), hour of day and length."""
    rng = np.random.default_rng([seed, 0xDA11])
    days = pd.date_range(start.floor("D"), end, freq="D", inclusive="left")
    rows = []
    for queue in queues:
        for k in range(per_queue):
            ask = int(rng.choice([4, 8, 16]))
            used = ask // int(rng.choice([2, 4]))
            hour, hours = float(rng.uniform(0, 24)), float(rng.uniform(2, 8))
            for d, day in enumerate(days):
                submit = day + pd.Timedelta(hours=hour + float(rng.uniform(0, 0.5)))
                if start <= submit < end:
                    duration = 3600 * hours * float(rng.uniform(0.9, 1.1))
                    rows.append((f"{queue}-daily{k}-{d}", submit, queue, ask, duration, f"{queue}-daily{k}", used))
    columns = ["job_id", "submit_time", "queue", "num_gpus", "duration_s", "workload", "gpus_used"]
    return normalise_jobs(pd.DataFrame(rows, columns=columns), source="daily jobs")


def recurring(*, weeks: int = 4, jobs_per_hour: float = 20.0, daily_queues: int = 6, seed: int = 0) -> Trace:
    """Background jobs plus daily ones in ``daily_queues`` of the queues, from a warm-up week before
    ``BEGIN`` to ``weeks`` weeks after it: one window."""
    end = BEGIN + pd.Timedelta(weeks=weeks)
    background = synthetic_jobs(BEGIN - WEEK, end, seed=seed, jobs_per_hour=jobs_per_hour)
    queues = background["queue"].value_counts().index[:daily_queues].astype(str).tolist()
    daily = daily_jobs(BEGIN - WEEK, end, queues, seed=seed)
    # Background jobs are each their own workload (never recurring) and keep their drawn usage (no gpus_used).
    background = background.assign(workload=background["job_id"], gpus_used=np.nan)
    jobs = pd.concat([background, daily], ignore_index=True).sort_values(["submit", "job_id"], kind="stable")
    return Trace("recurring", jobs.reset_index(drop=True), BEGIN, end, sliding=False)


def synthetic() -> Trace:
    """The simulator's jobs (60 an hour) recurring as 4 workload templates per queue: one 4-week window."""
    end = BEGIN + 4 * WEEK
    jobs = synthetic_jobs(BEGIN - WEEK, end, seed=0, jobs_per_hour=60, workloads_per_queue=4)
    return Trace("synthetic", jobs, BEGIN, end, sliding=False)
