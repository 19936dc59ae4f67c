"""``predictor replay`` and ``predictor.replay``: the summary a user reads, on traces small enough to reason
about (one or two nodes, a day or two replayed after the warm-up week)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from predictor import sim
from predictor.cli import main
from predictor.errors import InputError
from predictor.planner import PlannerSettings
from predictor.replay import POLICIES, ReplaySettings, replay
from tests.support.hourly_jobs import hourly_jobs

START = pd.Timestamp("2026-03-02", tz="UTC")
KEYS = {
    "allocation",
    "utilisation",
    "wait_p50_min",
    "wait_p95_min",
    "preemptions",
    "reclaims",
    "lost_gpu_h",
    "goodput_gpu_h",
    "fragmentation",
}


def _jobs(rows):
    return hourly_jobs(rows, START)


@pytest.fixture(scope="module")
def recurring(tmp_path_factory):
    jobs = sim.synthetic_jobs(
        START - pd.Timedelta(days=7), START + pd.Timedelta(days=1), seed=3, jobs_per_hour=8, workloads_per_queue=3
    )
    path = tmp_path_factory.mktemp("jobs") / "jobs.csv"
    jobs.assign(submit_time=jobs.pop("submit").astype(str)).to_csv(path, index=False)
    return path


def test_replay_command_writes_the_summary(recurring, tmp_path, capsys):
    code = main(
        [
            "replay",
            "--jobs",
            str(recurring),
            "--nodes",
            "1",
            "--start",
            START.isoformat(),
            "--weeks",
            str(1 / 7),
            "--policy",
            "loop",
            "--seed",
            "2",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert code == 0, capsys.readouterr().err
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert set(summary) >= KEYS
    assert 0 <= summary["utilisation"] <= summary["allocation"] <= 1
    assert summary["wait_p50_min"] <= summary["wait_p95_min"]
    assert summary["planning_cycles"] == 24 and summary["policy"] == "loop"
    assert 0 <= summary["fragmentation"] <= 1


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--policy", "best"], "--policy"),
        (["--policy", "loop", "--nodes", "0"], "--nodes"),
        (["--policy", "loop", "--start", "2020-01-01"], "no job is submitted"),
        (["--policy", "loop", "--start", "yesterday-ish"], "--start"),
    ],
)
def test_bad_replay_input_is_one_line(recurring, tmp_path, capsys, args, needle):
    base = {"--nodes": "1", "--start": START.isoformat(), "--weeks": "0.1"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    argv = ["replay", "--jobs", str(recurring), "--out", str(tmp_path / "r")]
    for flag, value in base.items():
        argv += [flag, value]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_measures_of_a_hand_made_trace():
    # One 8-GPU node; a 2-GPU job for 2 h and a 4-GPU job for 1 h in a one-day window: 8 of 192 GPU-hours.
    jobs = _jobs([(-30, "a", 1, 0.5), (1, "a", 2, 2), (5, "a", 4, 1)])
    r = replay(jobs, ReplaySettings(nodes=1, start=START, weeks=1 / 7, policy="static-hard"))
    s = r.summary
    assert s["allocation"] == pytest.approx(8 / 192, abs=1e-3)
    assert s["wait_p95_min"] < 1 and s["reclaims"] == 0 and s["lost_gpu_h"] == 0
    assert s["goodput_gpu_h"] <= 8 + 1e-9 and s["utilisation"] == pytest.approx(s["goodput_gpu_h"] / 192)


def test_elastic_quotas_borrow_and_pay_in_reclaim_while_hard_ones_wait():
    # The week before: a and b used the cluster equally (deserved 8 each of 16). In the replay a asks for
    # all 16 GPUs for 10 h, then b asks for its 8 after 1.5 h.
    history = [(-100 + i, q, 8, 0.5) for i in range(0, 20, 2) for q in ("a", "b")]
    jobs = _jobs([*history, (0, "a", 8, 10), (0, "a", 8, 10), (1.5, "b", 8, 2)])
    hard = replay(jobs, ReplaySettings(nodes=2, start=START, weeks=1 / 7, policy="static-hard")).summary
    elastic = replay(jobs, ReplaySettings(nodes=2, start=START, weeks=1 / 7, policy="static-elastic")).summary
    assert hard["reclaims"] == 0 and hard["lost_gpu_h"] == 0
    assert hard["wait_p95_min"] > 8 * 60  # a's second gang waited 10 h for its own deserved half
    # b reclaims one of a's gangs at 1.5 h: 0.5 h since its 1 h checkpoint is lost, and the 300 s restart
    assert elastic["reclaims"] == 1
    assert elastic["lost_gpu_h"] == pytest.approx(8 * 0.5 + 8 * 300 / 3600)
    assert elastic["wait_p95_min"] < hard["wait_p95_min"] and elastic["allocation"] > hard["allocation"]


def test_rightsize_loop_replays_smaller_requests_of_recurring_workloads():
    # A workload that asks for 8 GPUs and keeps 2 busy, run after run: right-sizing sets 2 from the replay on.
    rows = [(-165 + 2.5 * i, "a", 8, 1) for i in range(60)] + [(2 * i, "a", 8, 1) for i in range(12)]
    frame = _jobs(rows).assign(workload="a-train", gpus_used=2)
    frame = sim.normalise_jobs(frame.rename(columns={"submit": "submit_time"}))
    plain = replay(frame, ReplaySettings(nodes=2, start=START, weeks=1 / 7, policy="loop"))
    sized = replay(frame, ReplaySettings(nodes=2, start=START, weeks=1 / 7, policy="rightsize+loop"))
    assert (plain.rightsized_jobs, sized.rightsized_jobs) == (0, 12)
    assert sized.summary["allocation"] < plain.summary["allocation"]
    assert sized.summary["goodput_gpu_h"] == pytest.approx(plain.summary["goodput_gpu_h"])  # same work done


def test_every_policy_runs_and_the_settings_are_checked():
    jobs = _jobs([(-30, "a", 1, 0.5), (1, "a", 2, 2)])
    for policy in POLICIES:
        assert replay(jobs, ReplaySettings(nodes=1, start=START, weeks=1 / 7, policy=policy)).summary
    with pytest.raises(InputError, match="--weeks"):
        replay(jobs, ReplaySettings(nodes=1, start=START, weeks=0, policy="loop"))


def test_deserved_below_allocated_keeps_what_a_queue_holds_above_its_planned_share_reclaimable():
    # 16 GPUs. a fills them with 1-GPU jobs for 60 h; b's 8 jobs arrive at 36 h. The plan (oracle: the true
    # demand, so no forecast noise) soon gives b a share and a less than it holds. By default a's deserved
    # never goes below what it holds: nobody is above its deserved, reclaim finds no victim and b waits for
    # a's jobs to end (24 h). With planner.deserved_below_allocated a's deserved follows the plan and b
    # reclaims part of its share (less starvation: fewer pending GPU-hours).
    history = [(-100 + i, q, 8, 0.5) for i in range(0, 20, 2) for q in ("a", "b")]
    jobs = _jobs([*history, *[(0, "a", 1, 60)] * 16, *[(36, "b", 1, 10)] * 8])
    summaries = {}
    for below in (False, True):
        settings = ReplaySettings(
            nodes=2,
            start=START,
            weeks=3 / 7,
            policy="oracle",
            planner=PlannerSettings.model_validate({"deserved_below_allocated": below}),
        )
        summaries[below] = replay(jobs, settings).summary
    kept, reclaimed = summaries[False], summaries[True]
    assert kept["reclaims"] == 0 and kept["wait_p95_min"] > 20 * 60
    assert reclaimed["reclaims"] > 0 and reclaimed["pending_gpu_h"] < kept["pending_gpu_h"]


def test_a_reacting_loop_raises_a_waiting_queue_within_minutes_not_at_the_next_hour():
    # 16 GPUs, a holds 14 for 30 h; b's 12 one-GPU jobs arrive at 8.2 h, when b's deserved has been cut to 0
    # (nothing of b ran for a week). Hourly, b's deserved rises at the 9 h cycle at the earliest; a loop that
    # watches pending GPUs (planner.react_pending_gpus) with planner.pending_raise lifts it minutes after.
    history = [(-100 + i, q, 8, 0.5) for i in range(0, 20, 2) for q in ("a", "b")]
    jobs = _jobs([*history, *[(0, "a", 1, 30)] * 14, *[(8.2, "b", 1, 1)] * 12])
    runs = {}
    for react in (False, True):
        planner = PlannerSettings.model_validate({"pending_raise": "lift", "react_pending_gpus": 4 if react else 0})
        runs[react] = replay(jobs, ReplaySettings(nodes=2, start=START, weeks=0.5 / 7, policy="loop", planner=planner))
    for react, run in runs.items():
        s = run.schedule
        assert s is not None
        b = s.queue_names.index("b")
        raised = [
            t
            for t, before, after in zip(s.quota_s[1:], s.deserved[:-1, b], s.deserved[1:, b], strict=True)
            if after > before and t >= START.timestamp() + 8.2 * 3600
        ]
        delay_min = (raised[0] - (START.timestamp() + 8.2 * 3600)) / 60
        assert (delay_min <= 15) == react, (react, delay_min)
    assert runs[False].react_cycles == 0 and runs[True].react_cycles > 0


def test_a_cycle_writes_its_whole_plan_to_one_session():
    # Both queues' quotas change at the first cycle (capability from static-hard's deserved to the cluster); a
    # pass after each queue's write would let a session act on a half-applied plan (Scheduler.set_quotas).
    history = [(-100 + i, q, 8, 0.5) for i in range(0, 20, 2) for q in ("a", "b")]
    jobs = _jobs([*history, (0, "a", 8, 10), (0, "a", 8, 10), (1.5, "b", 8, 2)])
    r = replay(jobs, ReplaySettings(nodes=2, start=START, weeks=1 / 7, policy="loop", forecaster="naive"))
    s = r.schedule
    assert s is not None and r.quota_changes >= 2
    first = [i for i, t in enumerate(s.quota_s) if t == START.timestamp()]
    assert len(first) == 1 and set(s.capability[first[0]]) == {16.0}
    assert len(set(s.quota_s[1:])) == len(s.quota_s) - 1  # one record per cycle that changed anything
