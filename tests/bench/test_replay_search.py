"""``bench.replay_search``'s folds: which windows a held-out window may be chosen on, and which candidate a fold
chooses (the most goals met, then the least reclaim-lost relative to static elastic quotas)."""

from __future__ import annotations

import pandas as pd
import pytest

from bench.replay_search import CANDIDATES, choose, disjoint, report
from bench.replay_traces import Window
from predictor.planner import PlannerSettings

START = pd.Timestamp("2017-10-02T00:00Z")


def _w(index: int, trace: str = "philly") -> Window:
    return Window(trace, index, START + pd.Timedelta(weeks=index), 4.0)


def _s(goodput: float, lost: float, p95: float) -> dict[str, float]:
    return {"goodput_gpu_h": goodput, "lost_gpu_h": lost, "wait_p95_min": p95}


BASE = _s(100.0, 10.0, 100.0)  # p95 bound: 1.1 × 100 + 10 = 120


def test_a_fold_chooses_only_on_windows_sharing_no_week_with_the_held_out_one() -> None:
    assert not disjoint(_w(0), _w(3))  # weeks 0–3 and 3–6 share week 3
    assert disjoint(_w(0), _w(4))
    assert disjoint(_w(3), _w(0, "alibaba"))  # another trace never overlaps
    assert not disjoint(_w(2), _w(2))


def test_the_candidate_meeting_most_goals_is_chosen_then_the_least_reclaim() -> None:
    scores = {
        "fewer-goals": {("philly", 0): (_s(90.0, 1.0, 50.0), BASE)},  # goodput missed: 2 goals
        "more-lost": {("philly", 0): (_s(110.0, 9.0, 110.0), BASE)},  # 3 goals, 0.9 of SE's reclaim
        "less-lost": {("philly", 0): (_s(100.0, 5.0, 119.0), BASE)},  # 3 goals, 0.5 of SE's reclaim
    }
    assert choose(scores, [("philly", 0)]) == "less-lost"
    scores["less-lost"] = {("philly", 0): (_s(100.0, 5.0, 121.0), BASE)}  # p95 now over the bound
    assert choose(scores, [("philly", 0)]) == "more-lost"
    with pytest.raises(ValueError, match="at least one window"):
        choose(scores, [])


def test_the_report_scores_each_choice_on_its_held_out_window_only() -> None:
    windows = [_w(0), _w(4)]
    good, bad = _s(101.0, 5.0, 50.0), _s(99.0, 50.0, 500.0)
    scores = {  # "a" is best on w0 and worst on w4, "b" the reverse: each fold picks the loser of its held-out window
        "a": {("philly", 0): (good, BASE), ("philly", 4): (bad, BASE)},
        "b": {("philly", 0): (bad, BASE), ("philly", 4): (good, BASE)},
    }
    lines: list[str] = []
    report(scores, windows, lines.append)
    assert "Held out: goodput met on 0/2 windows, reclaim-lost on 0/2, p95 wait on 0/2." in lines
    folds = [line for line in lines if line.startswith("| philly w")][-2:]
    assert folds[0].startswith("| philly w0 | philly w4 | b |") and folds[1].startswith("| philly w4 | philly w0 | a |")


def test_every_candidate_is_a_valid_planner_setting() -> None:
    for name, settings in CANDIDATES.items():
        assert PlannerSettings.model_validate(settings), name
    assert CANDIDATES["default"] == {}


def test_a_window_with_nothing_disjoint_to_choose_on_is_reported_not_scored() -> None:
    scores = {"a": {("philly", 0): (BASE, BASE), ("philly", 1): (BASE, BASE)}}
    lines: list[str] = []
    report(scores, [_w(0), _w(1)], lines.append)  # weeks 0–3 and 1–4 overlap: neither fold has a window
    assert sum("no window shares no week with it" in line for line in lines) == 2
    assert "Held out: goodput met on 0/0 windows, reclaim-lost on 0/0, p95 wait on 0/0." in lines
