"""``bench.replay``'s windows, run cache and report, on small fake job tables (no public trace needed): the
windows a trace is cut into, a cache that a code change invalidates, ``mean (min–max)`` cells, the goals
marked per window and in- or out-of-sample, and the value-of-information arithmetic."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from bench import replay
from bench.replay_report import captured, goal_rows, in_sample, spread, table, value_of_information
from bench.replay_runs import (
    QUOTA_FREE,
    SOURCES,
    Cache,
    Result,
    Row,
    Run,
    jobs_digest,
    replays_as,
    rows,
    run_all,
    run_key,
    source_digest,
)
from bench.replay_traces import Trace, Window, windows
from predictor import sim
from predictor.errors import InputError
from predictor.planner import PlannerSettings

BEGIN = pd.Timestamp("2017-10-02T00:00Z")
WEEK = pd.Timedelta(days=7)


def _jobs(n: int = 20, gpus: int = 1) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "submit_time": [str(BEGIN - WEEK + pd.Timedelta(hours=6 * i)) for i in range(n)],
            "queue": ["a", "b"] * (n // 2),
            "num_gpus": gpus,
            "duration_s": 3600.0,
        }
    )
    return sim.normalise_jobs(frame)


def _trace(weeks: float, sliding: bool) -> Trace:
    return Trace("philly", _jobs(), BEGIN, BEGIN + pd.Timedelta(weeks=weeks), sliding=sliding)


def test_ten_weeks_give_seven_four_week_windows_stepping_a_week() -> None:
    got = windows(_trace(10, sliding=True), 4)
    assert [w.start for w in got] == [BEGIN + k * WEEK for k in range(7)]
    assert [w.index for w in got] == list(range(7))
    assert all(w.weeks == 4 for w in got)
    assert got[-1].end == BEGIN + 10 * WEEK  # the last window ends with the span, none runs past it
    assert len(windows(_trace(10, sliding=True), 1)) == 10


def test_a_whole_span_trace_is_one_window_clipped_to_its_span() -> None:
    (only,) = windows(_trace(3.4, sliding=False), 4)
    assert only.start == BEGIN and only.weeks == pytest.approx(3.4)
    (short,) = windows(_trace(3.4, sliding=False), 1)
    assert short.weeks == 1
    (all_of_it,) = windows(_trace(3.0, sliding=True), 4)  # shorter than a window: the span, once
    assert all_of_it.weeks == pytest.approx(3.0)


def _repo(tmp: Path) -> Path:
    for name in [*(f"{d}/module.py" for d in SOURCES), "docs/x.py"]:
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text("x = 1\n")
    return tmp


RUN = Run(Window("philly", 1, BEGIN + WEEK, 1.0), 0, Row("loop", "loop"), 83, 0.8)


def test_the_cache_key_changes_with_the_replay_simulator_and_planner_sources(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    planner = PlannerSettings.model_validate({})
    before = source_digest(repo)
    key = run_key(RUN, "jobs", planner, before)
    (repo / "docs/x.py").write_text("x = 2\n")  # not a source of the numbers
    assert source_digest(repo) == before
    assert {"predictor/replay", "predictor/sim", "predictor/planner"} <= set(SOURCES)
    for name in (f"{d}/module.py" for d in SOURCES):
        (repo / name).write_text((repo / name).read_text() + "# changed\n")
        after = source_digest(repo)
        assert after != before, name
        assert run_key(RUN, "jobs", planner, after) != key
        before = after


def test_the_cache_key_changes_with_every_input() -> None:
    planner = PlannerSettings.model_validate({})
    key = run_key(RUN, "jobs", planner, "code")
    others = [
        run_key(Run(RUN.window, 1, RUN.row, RUN.nodes, RUN.fluid_bound), "jobs", planner, "code"),
        run_key(Run(RUN.window, 0, Row("loop/naive", "loop", "naive"), 83, 0.8), "jobs", planner, "code"),
        run_key(Run(Window("philly", 2, BEGIN + 2 * WEEK, 1.0), 0, RUN.row, 83, 0.8), "jobs", planner, "code"),
        run_key(Run(RUN.window, 0, RUN.row, 84, 0.8), "jobs", planner, "code"),
        run_key(RUN, "other jobs", planner, "code"),
        run_key(RUN, "jobs", PlannerSettings.model_validate({"pending_raise": "lift"}), "code"),
    ]
    assert key not in others and len(set(others)) == len(others)
    assert jobs_digest(_jobs(gpus=1)) != jobs_digest(_jobs(gpus=2))
    assert jobs_digest(_jobs()) == jobs_digest(_jobs().set_axis(range(100, 120)))


def _result(row: str, window: int = 0, seed: int = 0, **summary: float) -> Result:
    base = {
        "allocation": 0.8,
        "goodput_gpu_h": 1000.0,
        "lost_gpu_h": 10.0,
        "wait_p50_min": 0.1,
        "wait_p95_min": 100.0,
        "fragmentation": 0.001,
    }
    start = BEGIN + window * WEEK
    return Result("philly", window, start.isoformat(), 4.0, seed, row, 83, 0.8, {**base, **summary}, 0, 50, 0, 12.0)


def test_a_cached_run_is_served_without_replaying(tmp_path: Path) -> None:
    cache, planner = Cache(tmp_path), PlannerSettings.model_validate({})
    jobs = _jobs()
    cache.put(run_key(RUN, jobs_digest(jobs), planner, "code"), _result("loop"))
    lines: list[str] = []
    (got,) = run_all([RUN], lambda w: jobs, planner, cache, "code", progress=lambda *a: lines.append(a[2].row))
    assert got.cached and got.summary["goodput_gpu_h"] == 1000.0 and lines == ["loop"]
    with pytest.raises(InputError, match="no job is submitted"):  # other code: a miss, so it replays (no jobs here)
        run_all([RUN], lambda w: jobs.iloc[:0], planner, cache, "other code", progress=lambda *a: None)


def test_rightsize_loop_on_a_trace_without_workloads_is_the_loop_replayed_once(tmp_path: Path) -> None:
    jobs, planner = _jobs(), PlannerSettings.model_validate({})
    rightsize = Row("rightsize+loop", "rightsize+loop")
    assert replays_as(rightsize, jobs) == Row("rightsize+loop", "loop")
    assert replays_as(rightsize, jobs.assign(workload="w")) == rightsize  # recurring jobs: its own replay
    cache = Cache(tmp_path)
    cache.put(run_key(RUN, jobs_digest(jobs), planner, "code"), _result("loop"))
    both = [RUN, Run(RUN.window, 0, rightsize, 83, 0.8)]
    got = run_all(both, lambda w: jobs, planner, cache, "code", progress=lambda *a: None)
    assert [r.row for r in got] == ["loop", "rightsize+loop"] and got[0].summary == got[1].summary


def test_cells_are_mean_min_max_over_windows_and_seeds() -> None:
    assert spread([1.0, 2.0, 6.0], ",.1f") == "3.0 (1.0–6.0)"
    assert spread([0.5], ".1%") == "50.0%"
    assert spread([2.0, 2.0], ",.0f") == "2"  # all equal: one number
    results = [
        _result("loop", w, s, goodput_gpu_h=g)
        for (w, s), g in zip([(0, 0), (0, 1), (1, 0)], [900, 1000, 1400], strict=True)
    ]
    line = next(x for x in table(results) if x.startswith("| loop |"))
    assert "| 1,100 (900–1,400) |" in line and line.endswith("| 3 | 12 |")


def test_windows_are_marked_by_whether_the_defaults_were_chosen_on_them() -> None:
    start = pd.Timestamp("2017-10-09T00:00Z")
    assert in_sample("philly", start, start + 4 * WEEK) == "chosen on"
    assert in_sample("philly", start + WEEK, start + WEEK + WEEK) == "chosen on"
    assert in_sample("philly", start + 2 * WEEK, start + 6 * WEEK) == "overlaps"
    assert in_sample("philly", start + 4 * WEEK, start + 8 * WEEK) == "held out"
    assert in_sample("recurring", start, start + WEEK) == "held out"


def test_goals_are_checked_per_window_with_the_p95_allowance() -> None:
    results = [
        _result("static-elastic", 1),
        _result("loop", 1, goodput_gpu_h=1001, lost_gpu_h=10, wait_p95_min=120.0),  # 1.1 × 100 + 10: met
        _result("static-elastic", 5),
        _result("loop", 5, goodput_gpu_h=1001, lost_gpu_h=9, wait_p95_min=120.1),  # just above: not met
    ]
    lines = goal_rows(results)
    w1 = next(x for x in lines if x.startswith("| w1 "))
    w5 = next(x for x in lines if x.startswith("| w5 "))
    assert "| chosen on |" in w1 and w1.endswith("| met |")
    assert "| held out |" in w5 and "**NOT met**: 120.1 vs ≤ 120.0 min" in w5 and w5.endswith("| **NOT met** |")
    assert (
        lines[-1]
        == "Goals with the defaults: chosen on: 1/1 windows meet all three; held out: 0/1 windows meet all three."
    )
    worse = goal_rows([_result("static-elastic"), _result("loop", goodput_gpu_h=999, lost_gpu_h=11)])
    assert "**NOT met**: -1 GPU-h" in worse[2] and "**NOT met**: 11.0 vs 10.0" in worse[2]


def test_the_share_auto_captures_of_the_oracle_gain() -> None:
    assert captured(naive=100, auto=75, oracle=50) == pytest.approx(0.5)
    assert captured(naive=100, auto=110, oracle=50) == pytest.approx(-0.2)
    assert captured(naive=100, auto=80, oracle=100) is None  # knowing the future buys nothing
    assert captured(naive=100, auto=80, oracle=130) is None
    assert captured(naive=100, auto=80, oracle=99.5) is None  # under 1 % of naive: noise


def _voi(naive: float, auto: float, oracle: float) -> list[str]:
    return value_of_information(
        [
            _result(row, wait_p95_min=v, lost_gpu_h=v)
            for row, v in (("loop/naive", naive), ("loop/auto", auto), ("loop/oracle", oracle))
        ]
    )


def test_value_of_information_says_plainly_when_the_forecast_buys_nothing() -> None:
    met = _voi(100, 70, 50)
    assert "oracle − naive -50.0 min" in met[1] and "auto captures 60% (met)" in met[1]
    assert "auto captures 20% (**NOT met**)" in _voi(100, 90, 50)[1]
    same = _voi(100, 90, 100)
    assert "the forecast buys nothing here" in same[1] and "the forecast buys nothing here" in same[2]
    assert "not measured" in value_of_information([_result("loop"), _result("oracle")])[0]


def test_rows_split_the_loop_by_forecaster_only_where_the_replay_allows_it() -> None:
    today = [r.name for r in rows(("static-elastic", "loop", "oracle"), forecaster=False)]
    assert today == ["static-elastic", "loop", "oracle", QUOTA_FREE]
    split = rows(("static-elastic", "loop", "oracle"), forecaster=True)  # oracle is loop/oracle there
    assert [r.name for r in split] == ["static-elastic", "loop/naive", "loop/auto", "loop/oracle", QUOTA_FREE]
    assert {r.forecaster for r in split if r.policy == "loop"} == {"naive", "auto", "oracle"}
    assert split[-1].one_queue and split[-1].policy == "static-elastic"


def test_seed_flag_and_bad_flags_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert replay.seeds_of("3") == [0, 1, 2]
    assert replay.seeds_of("3,0") == [0, 3]
    for argv in (
        ["--seeds", "x"],
        ["--jobs", "0"],
        ["--traces", "nope"],
        ["--rows", "bogus"],
        ["--seeds", "0"],
        # refused before the traces load: where the public traces are missing, it is still this flag named
        ["--windows", "x", "--data", "/nonexistent"],
        ["--windows=-1", "--data", "/nonexistent"],
        ["--set", "cooldown_s", "--data", "/nonexistent"],
        ["--set", "no_such_setting=1", "--data", "/nonexistent"],
        ["--set", "cooldown_s=soon", "--data", "/nonexistent"],
    ):
        assert replay.main(argv) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, argv
        assert "--data" not in err, err
    with pytest.raises(SystemExit):  # argparse's own errors, one line too
        replay.main(["--jobs", "two"])
    assert capsys.readouterr().err == "error: argument --jobs: invalid int value: 'two'\n"


def test_any_planner_setting_can_be_set_by_name() -> None:
    args = replay.parser().parse_args(
        ["--set", "cooldown_s=21600", "--set", "pending_raise=lift", "--tail-quantile", "0.6"]
    )
    planner = replay.planner_of(args)
    assert (planner.cooldown_s, planner.pending_raise, planner.tail_quantile) == (21600.0, "lift", 0.6)
    assert replay.planner_of(replay.parser().parse_args([])) == PlannerSettings()


def test_the_recurring_trace_gives_right_sizing_requests_to_change() -> None:
    from bench.replay_recurring import recurring
    from predictor.replay.rightsize import rightsized_jobs

    trace = recurring(weeks=1, jobs_per_hour=1.0)
    daily = trace.jobs[trace.jobs["workload"].str.contains("-daily")]
    assert (daily["gpus_used"] < daily["num_gpus"]).all()
    window = trace.jobs[trace.jobs["submit"] >= trace.begin - WEEK]
    out, changed = rightsized_jobs(window.reset_index(drop=True), trace.begin, 8, 0)
    later = out[(out["submit"] >= trace.begin) & out["workload"].str.contains("-daily")]
    assert changed == len(later) > 0  # every daily run in the window asks for less than before
