"""The forecast-free baselines: Volcano's proportion plugin (weights, water-filling over requests) and static
quotas re-estimated weekly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from predictor.cli import main
from predictor.errors import InputError
from predictor.replay import ReplaySettings, replay
from predictor.replay.baselines import water_fill
from tests.support.hourly_jobs import hourly_jobs

START = pd.Timestamp("2026-03-02", tz="UTC")
WEEK_H = 168
# The warm-up week: a and b submit the same GPU-time, so the static quotas start at 8 / 8 of 16 GPUs.
HISTORY = [(-100 + i, q, 8, 0.5) for i in range(0, 20, 2) for q in ("a", "b")]


def _jobs(rows):
    return hourly_jobs(rows, START)


def _last(schedule, field):
    values = getattr(schedule, field)[-1]
    return dict(zip(schedule.queue_names, np.asarray(values).tolist(), strict=True))


def test_water_fill_shares_by_weight_and_hands_on_what_a_queue_does_not_ask_for():
    assert water_fill({"a": 100, "b": 100}, {"a": 1, "b": 3}, 40) == pytest.approx({"a": 10, "b": 30})
    assert water_fill({"a": 5, "b": 100}, {"a": 1, "b": 1}, 40) == pytest.approx({"a": 5, "b": 35})
    # two rounds: c's 1/3 share is 10, it asks for 4; the 6 left go 1:1 to a and b
    assert water_fill({"a": 50, "b": 50, "c": 4}, {}, 30) == pytest.approx({"a": 13, "b": 13, "c": 4})
    assert water_fill({"a": 3, "b": 2}, {}, 40) == {"a": 3, "b": 2}  # nobody gets more than it asks
    assert water_fill({"a": 0, "b": 9}, {"a": 5}, 8) == {"a": 0, "b": 8}


def test_proportion_splits_the_cluster_by_queue_weight():
    # 16 GPUs; a and b each ask for all of them (16 one-GPU jobs for 20 h): with weights 1:3, 4 and 12.
    jobs = _jobs([*HISTORY, *[(0, "a", 1, 20)] * 16, *[(0.1, "b", 1, 20)] * 16])
    settings = ReplaySettings(nodes=2, start=START, weeks=0.5 / 7, policy="proportion", queue_weights={"b": 3})
    r = replay(jobs, settings)
    assert r.schedule is not None
    assert _last(r.schedule, "deserved") == pytest.approx({"a": 4, "b": 12})
    assert _last(r.schedule, "allocated") == {"a": 4, "b": 12}  # b reclaimed what a took before it arrived
    assert r.summary["reclaims"] >= 8 and r.quota_changes > 0


def test_proportion_gives_what_a_queue_does_not_ask_for_to_the_others():
    # Equal weights; a asks for 2 GPUs, b for 30: a gets its 2, b the other 14 (not its half, 8).
    jobs = _jobs([*HISTORY, *[(0, "a", 1, 20)] * 2, *[(0, "b", 1, 20)] * 30])
    r = replay(jobs, ReplaySettings(nodes=2, start=START, weeks=0.5 / 7, policy="proportion"))
    assert r.schedule is not None
    assert _last(r.schedule, "deserved") == pytest.approx({"a": 2, "b": 14})
    assert _last(r.schedule, "allocated") == {"a": 2, "b": 14}


def test_static_weekly_reestimates_the_quotas_at_each_week_boundary():
    # In the first replayed week only a submits: at the second week's start its quota becomes the cluster's.
    jobs = _jobs([*HISTORY, *[(10 * i, "a", 8, 1) for i in range(16)], (WEEK_H + 1, "b", 1, 1)])
    runs = {
        p: replay(jobs, ReplaySettings(nodes=2, start=START, weeks=8 / 7, policy=p)).schedule
        for p in ("static-elastic", "static-weekly")
    }
    boundary = (START + pd.Timedelta(hours=WEEK_H)).timestamp()
    for policy, s in runs.items():
        assert s is not None
        a, b = s.queue_names.index("a"), s.queue_names.index("b")
        before = s.deserved[s.quota_s < boundary][-1]
        after = s.deserved[-1]
        assert (before[a], before[b]) == (8, 8)
        changed = s.quota_s[1:][np.any(s.deserved[1:] != s.deserved[:-1], axis=1)]
        if policy == "static-weekly":
            assert (after[a], after[b]) == (16, 1) and changed.tolist() == [boundary]
        else:
            assert (after[a], after[b]) == (8, 8) and len(changed) == 0


def test_bad_queue_weights_are_one_line(tmp_path, capsys):
    path = tmp_path / "jobs.csv"
    path.write_text(f"submit_time,queue,num_gpus,duration_s\n{START.isoformat()},a,1,60\n")
    base = ["replay", "--jobs", str(path), "--nodes", "1", "--start", START.isoformat(), "--weeks", "0.1"]
    for weight, needle in (("a=0", "--queue-weight"), ("a:2", "--queue-weight"), ("zz=2", "no queue named")):
        assert main([*base, "--policy", "proportion", "--queue-weight", weight, "--out", str(tmp_path / "r")]) == 1
        err = capsys.readouterr().err.strip()
        assert needle in err and len(err.splitlines()) == 1, err
    # a queue weighted twice, or weights under a policy that reads none, would be dropped in silence
    for policy, weights, needle in (("proportion", ["a=2", "a=3"], "twice"), ("static-hard", ["a=2"], "only --policy")):
        flags = [x for w in weights for x in ("--queue-weight", w)]
        assert main([*base, "--policy", policy, *flags, "--out", str(tmp_path / "r")]) == 1
        err = capsys.readouterr().err.strip()
        assert needle in err and len(err.splitlines()) == 1, err
        assert not (tmp_path / "r").exists()
    with pytest.raises(InputError, match="integer >= 1"):
        ReplaySettings(nodes=1, start=START, weeks=1, policy="proportion", queue_weights={"a": 0}).check()
