"""``bench.experiments.replay_tail``: the jobs past a p95 bound are counted as the replay counts waits."""

from __future__ import annotations

import pandas as pd

from bench.experiments.replay_tail import tail_lines, waits

START = pd.Timestamp("2026-01-12T00:00Z")
END = START + pd.Timedelta(days=2)


def test_a_job_never_started_waits_until_the_window_ends_and_jobs_before_it_are_left_out() -> None:
    jobs = pd.DataFrame(
        {
            "job_id": ["early", "a", "b", "never"],
            "queue": ["q", "q", "r", "r"],
            "submit": [
                START - pd.Timedelta(hours=1),
                START,
                START + pd.Timedelta(hours=1),
                END - pd.Timedelta(hours=3),
            ],
        }
    )
    attempts = pd.DataFrame(
        {"job_id": ["early", "a", "a", "b"], "attempt": [0, 0, 1, 0], "wait_s": [9e9, 60.0, 9e9, 1800.0]}
    )
    w = waits(jobs, attempts, START, END)
    assert w["wait_min"].tolist() == [1.0, 30.0, 180.0]  # a's retry does not count; never waits 3 h to the end
    assert w["never"].tolist() == [False, False, True]
    head, by_queue, by_day = tail_lines("loop", w, bound=20.0)
    assert "2 of 3 jobs (66.7%) wait more than 20.0 min, 1 of them never started; the goal allows 0" in head
    assert by_queue.strip() == "by queue: r 2 (105 min)"
    assert by_day.strip() == "by day submitted: 2026-01-12 1, 2026-01-13 1"
