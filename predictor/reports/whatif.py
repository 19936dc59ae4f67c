"""What-if: the report window's jobs replayed under today's quotas and under the recommended ones.

Both runs go through the same simulator (``predictor.replay.replay_quotas``: Volcano's capacity plugin with
reclaim and preemption, hourly checkpoints, a 5-minute restart), so the two columns compare like with like:
same jobs, same cluster, only the quotas differ. The history's own numbers are not mixed in (a replay of
"as run" is not the real cluster, and a forecast is not a replay). Needs the job table the history came
from (``jobs_out.parquet`` of ``predictor simulate``, or the jobs ``predictor.reports.podjobs`` rebuilds from
kube-state-metrics pods); without one the report says why in one line.
"""

from __future__ import annotations

import math

import pandas as pd

from predictor.errors import InputError
from predictor.replay import ReplaySettings, replay_quotas
from predictor.reports.headline import MEASURE_LABELS, MEASURES
from predictor.reports.model import WhatIfRow
from predictor.sim import QueueSpec, normalise_jobs

__all__ = ["MEASURES", "MEASURE_LABELS", "jobs_from_attempts", "starvation_avoided", "whatif_rows"]


def jobs_from_attempts(attempts: pd.DataFrame) -> pd.DataFrame:
    """A job table (``predictor simulate --jobs`` schema) from the attempts of a run: one row per job, its
    first submit, its request, and the run time of its last attempt (a finished attempt ran the whole job)."""
    need = ("job_id", "queue", "num_gpus", "submit", "start", "end")
    missing = [c for c in need if c not in attempts.columns]
    if missing:
        raise InputError(f"job attempts: missing column {missing[0]!r}")
    a = attempts.sort_values(["job_id", "start"], kind="stable")
    last = a.groupby("job_id", sort=False).tail(1).set_index("job_id")
    first = a.groupby("job_id", sort=False)["submit"].min()
    run_s = (pd.to_datetime(last["end"], utc=True) - pd.to_datetime(last["start"], utc=True)).dt.total_seconds()
    frame = pd.DataFrame(
        {
            "job_id": last.index.astype(str),
            "submit_time": pd.to_datetime(first[last.index], utc=True).to_numpy(),
            "queue": last["queue"].astype(str).to_numpy(),
            "num_gpus": last["num_gpus"].to_numpy(),
            "duration_s": run_s.clip(lower=1).to_numpy(),
        }
    )
    return normalise_jobs(frame, source="job attempts")


def _specs(table: pd.DataFrame, queues: list[str]) -> list[QueueSpec]:
    rows = {str(r["queue"]): r for r in table.to_dict("records")}
    specs = []
    for name in queues:
        r = rows.get(name)
        deserved = float(r["deserved"]) if r is not None else 0.0
        capability = float(r["capability"]) if r is not None else math.inf
        guarantee = min(float(r["guarantee"]) if r is not None else 0.0, deserved)
        specs.append(QueueSpec(name, deserved=deserved, capability=max(capability, deserved), guarantee=guarantee))
    return specs


def whatif_rows(
    jobs: pd.DataFrame,
    quotas: pd.DataFrame,
    recommendations: pd.DataFrame,
    *,
    total_gpus: float,
    as_of: pd.Timestamp,
    window_days: int,
    gpus_per_node: int = 8,
    seed: int = 0,
) -> tuple[WhatIfRow, ...]:
    """The window ``(as_of − window_days, as_of]`` replayed under ``quotas`` and under ``recommendations``."""
    nodes = max(1, int(total_gpus // gpus_per_node))
    start = (as_of - pd.Timedelta(days=window_days)).ceil("h")
    queues = sorted(jobs["queue"].astype(str).unique())
    settings = ReplaySettings(
        nodes=nodes, start=start, weeks=window_days / 7, policy="static-hard", gpus_per_node=gpus_per_node, seed=seed
    )
    before = replay_quotas(jobs, _specs(quotas, queues), settings, as_of)
    after = replay_quotas(jobs, _specs(recommendations, queues), settings, as_of)
    rows = []
    for key, label, unit, direction in MEASURES:
        a, b = float(before[key]), float(after[key])
        scale = 1e-3 if unit == "pct" else max(1e-6, 0.005 * max(abs(a), abs(b)))
        verdict = (
            "same" if abs(b - a) <= scale or direction == 0 else ("better" if (b - a) * direction > 0 else "worse")
        )
        rows.append(WhatIfRow(label, unit, round(a, 3) + 0.0, round(b, 3) + 0.0, verdict))
    return tuple(rows)


def starvation_avoided(rows: tuple[WhatIfRow, ...]) -> str:
    """What the recommendations do to starvation in the what-if replay, in numbers, for a headline.

    Why: raising deserved for a queue that starves lowers quota utilisation (used ÷ deserved) on purpose, so
    "utilisation after" below "now" is only a good plan if the replay shows the starvation it removes: the
    pending GPU-hours and the p95 wait, as-run → recommended. Says plainly when there is nothing avoided.
    """
    by = {r.measure: r for r in rows}
    pending, wait = by.get(MEASURE_LABELS["pending_gpu_h"]), by.get(MEASURE_LABELS["wait_p95_min"])
    if pending is None or wait is None:
        return "starvation avoided not measured (no what-if replay)"
    avoided = pending.as_run - pending.recommended
    words = f"{avoided:,.0f} pending GPU-h avoided" if avoided > 0 else f"no pending GPU-h avoided ({-avoided:+,.0f})"
    return (
        f"{words} in the replayed what-if ({pending.as_run:,.0f} → {pending.recommended:,.0f}), p95 wait "
        f"{wait.as_run:,.0f} → {wait.recommended:,.0f} min"
    )
