from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from predictor import sim
from predictor.errors import InputError


def test_philly_table_maps_vc_and_pacific_time(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text(
        "job_idx,submit_time,vc,num_gpus,duration_s\n"
        "0,2017-10-09 07:01:55,11CB48,1,66.0\n"
        "1,2017-11-05 01:30:00,6214e9,8,100\n"  # ambiguous (DST end) hour: taken as standard time
        "2,2017-07-01 12:00:00,6214e9,2,5\n"
    )
    jobs = sim.load_jobs(path)
    assert list(jobs.columns) == ["job_id", "submit", "queue", "num_gpus", "duration_s"]
    assert jobs["submit"].iloc[0] == pd.Timestamp("2017-07-01 19:00", tz="UTC")  # PDT = UTC-7
    assert jobs["submit"].iloc[1] == pd.Timestamp("2017-10-09 14:01:55", tz="UTC")
    assert jobs["submit"].iloc[2] == pd.Timestamp("2017-11-05 09:30", tz="UTC")  # PST = UTC-8
    assert set(jobs["queue"]) == {"11cb48", "6214e9"}


def test_bundled_sample_is_a_few_thousand_philly_jobs():
    jobs = sim.philly_sample()
    assert 2000 < len(jobs) < 20000
    assert jobs["num_gpus"].max() <= 128 and (jobs["num_gpus"] == 1).mean() > 0.8


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("submit_time,vc,num_gpus\n2017-10-09 07:01:55,a,1\n", "missing column"),
        ("submit_time,vc,num_gpus,duration_s\n2017-10-09 07:01:55,a,0,5\n", "num_gpus"),
        ("submit_time,vc,num_gpus,duration_s\nyesterday,a,1,5\n", "not a timestamp"),
        ("submit_time,vc,num_gpus,duration_s\n", "no rows"),
    ],
)
def test_bad_job_tables_are_input_errors(tmp_path, body, message):
    path = tmp_path / "jobs.csv"
    path.write_text(body)
    with pytest.raises(InputError, match=message):
        sim.load_jobs(path)


def test_synthetic_jobs_are_deterministic_and_philly_shaped():
    start = pd.Timestamp("2026-01-05", tz="UTC")
    a = sim.synthetic_jobs(start, start + pd.Timedelta(weeks=2), seed=3)
    b = sim.synthetic_jobs(start, start + pd.Timedelta(weeks=2), seed=3)
    pd.testing.assert_frame_equal(a, b)
    assert (a["num_gpus"] == 1).mean() > 0.85
    assert 10 < a["duration_s"].median() < 10_000
    per_day = a.set_index("submit").resample("D").size()
    weekday = per_day[per_day.index.day_of_week < 5].mean()
    weekend = per_day[per_day.index.day_of_week >= 5].mean()
    assert weekend < weekday  # weekly cycle
    hourly = a.set_index("submit").resample("h").size().groupby(lambda t: t.hour).mean()
    assert hourly.max() > 1.4 * hourly.min()  # daily cycle
    assert np.isclose(len(a) / (14 * 24), 60 * (5 + 2 * 0.7) / 7, rtol=0.1)


def test_numeric_looking_queue_names_stay_text(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text(
        "submit_time,vc,num_gpus,duration_s\n2017-10-09 07:01:55,6214e9,1,5\n2017-10-09 07:02:00,0001,1,5\n"
    )
    assert list(sim.load_jobs(path)["queue"]) == ["6214e9", "0001"]


def test_recurring_workloads_repeat_per_queue_with_a_skew():
    start = pd.Timestamp("2026-01-05", tz="UTC")
    plain = sim.synthetic_jobs(start, start + pd.Timedelta(days=3), seed=3, jobs_per_hour=10)
    jobs = sim.synthetic_jobs(start, start + pd.Timedelta(days=3), seed=3, jobs_per_hour=10, workloads_per_queue=5)
    pd.testing.assert_series_equal(plain["submit"], jobs["submit"])  # same arrivals, only identities differ
    assert "workload" not in plain.columns
    assert (jobs["workload"].str.split("-").str[0] == jobs["queue"]).all()
    counts = jobs.groupby(["queue", "workload"]).size()
    assert counts.groupby(level="queue").size().max() <= 5
    top = counts.groupby(level="queue").max() / counts.groupby(level="queue").sum()
    assert (top[counts.groupby(level="queue").sum() > 50] > 0.25).all()  # the first template dominates
    # A template keeps its GPU count from run to run.
    assert (jobs.groupby("workload")["num_gpus"].nunique() == 1).all()
    assert jobs["job_id"].is_unique
    assert all(j.startswith(f"{w}-") for j, w in zip(jobs["job_id"], jobs["workload"], strict=True))
