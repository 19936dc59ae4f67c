"""The report's what-if: the window's jobs replayed under today's quotas and the recommended ones."""

from __future__ import annotations

import pandas as pd

from predictor.reports.whatif import jobs_from_attempts, whatif_rows

T0 = pd.Timestamp("2026-03-02", tz="UTC")


def _attempts() -> pd.DataFrame:
    # Queue a runs 1-GPU jobs all week and wants 6 GPUs at a time; b is nearly idle. One 8-GPU node.
    rows = []
    for i in range(14 * 24):
        submit = T0 - pd.Timedelta(days=7) + pd.Timedelta(hours=i)
        for k in range(6):
            rows.append((f"a{i}-{k}", "a", 1, submit, submit, submit + pd.Timedelta(hours=1)))
        if i % 24 == 0:
            rows.append((f"b{i}", "b", 1, submit, submit, submit + pd.Timedelta(hours=1)))
    return pd.DataFrame(rows, columns=["job_id", "queue", "num_gpus", "submit", "start", "end"])


def test_jobs_from_attempts_keeps_one_row_per_job_with_its_last_run_time() -> None:
    a = pd.DataFrame(
        {
            "job_id": ["x", "x"],
            "queue": ["q", "q"],
            "num_gpus": [2, 2],
            "submit": [T0, T0],
            "start": [T0, T0 + pd.Timedelta(hours=2)],
            "end": [T0 + pd.Timedelta(hours=1), T0 + pd.Timedelta(hours=5)],
        }
    )
    jobs = jobs_from_attempts(a)
    assert len(jobs) == 1 and jobs["duration_s"].iloc[0] == 3 * 3600 and jobs["submit"].iloc[0] == T0


def test_whatif_shows_the_starvation_a_larger_quota_avoids() -> None:
    jobs = jobs_from_attempts(_attempts())
    today = pd.DataFrame({"queue": ["a", "b"], "guarantee": 0.0, "deserved": [3.0, 5.0], "capability": [3.0, 5.0]})
    rec = pd.DataFrame({"queue": ["a", "b"], "guarantee": 0.0, "deserved": [6.0, 2.0], "capability": [6.0, 2.0]})
    rows = {
        r.measure: r
        for r in whatif_rows(jobs, today, rec, total_gpus=8, as_of=T0 + pd.Timedelta(days=7), window_days=7)
    }
    starved = rows["starvation: pending GPU-hours"]
    assert starved.as_run > 0 and starved.recommended < starved.as_run and starved.verdict == "better"
    util = rows["quota utilisation (allocated / deserved)"]
    assert util.recommended > util.as_run and util.verdict == "better"
    assert rows["allocation (allocated / GPUs)"].recommended > rows["allocation (allocated / GPUs)"].as_run


def test_starvation_avoided_states_the_numbers_or_that_there_are_none() -> None:
    from predictor.reports.model import WhatIfRow
    from predictor.reports.whatif import starvation_avoided

    def rows(pending: tuple[float, float], wait: tuple[float, float]) -> tuple[WhatIfRow, ...]:
        return (
            WhatIfRow("starvation: pending GPU-hours", "num", *pending, "better"),
            WhatIfRow("wait p95, min", "num", *wait, "better"),
        )

    assert starvation_avoided(rows((1200.0, 200.0), (95.0, 12.0))) == (
        "1,000 pending GPU-h avoided in the replayed what-if (1,200 → 200), p95 wait 95 → 12 min"
    )
    assert starvation_avoided(rows((0.0, 0.0), (0.1, 0.1))).startswith("no pending GPU-h avoided")
    assert starvation_avoided(()) == "starvation avoided not measured (no what-if replay)"
