"""``plan_cycle``: the stale-data hold, targets and the invariant gate that the loop and ``plan`` share."""

from __future__ import annotations

import pandas as pd

from predictor.planner import (
    PlannerSettings,
    capacity_drop,
    plan_cycle,
    queue_from_object,
    stale_forecast,
    stale_series,
)
from tests.actuators.fake_apiserver import queue_object

NOW = pd.Timestamp("2026-11-02T00:00:00Z")
SETTINGS = PlannerSettings()  # type: ignore[call-arg]


def forecast(start: pd.Timestamp, hours: int = 24, level: float = 22.0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "series_id": "team-a",
            "timestamp": pd.date_range(start, periods=hours, freq="h"),
            "mean": level,
            "lo-80": level - 2,
            "hi-80": level + 2,
            "lo-95": level - 4,
            "hi-95": level + 4,
        }
    )


def queues() -> list:
    return [queue_from_object(queue_object("team-a", deserved=16, capability=32, guarantee=4, allocated=10))]


def test_stale_forecast_names_why() -> None:
    assert stale_forecast(forecast(NOW), SETTINGS, now=NOW) is None
    assert stale_forecast(forecast(NOW - pd.Timedelta(hours=2)), SETTINGS, now=NOW) is None  # exactly at the limit
    code, why = stale_forecast(forecast(NOW - pd.Timedelta(hours=3)), SETTINGS, now=NOW) or ("", "")
    assert code == "stale_data" and "older than 7200 s" in why
    code, why = stale_forecast(forecast(NOW - pd.Timedelta(days=2)), SETTINGS, now=NOW) or ("", "")
    assert code == "stale_data" and why.startswith("forecast ends")


def test_a_fresh_forecast_plans_and_a_stale_one_holds_everything() -> None:
    fresh = plan_cycle(queues(), forecast(NOW), SETTINGS, now=NOW)
    assert fresh.hold is None and {(c.queue, c.field) for c in fresh.plan.changes} >= {("team-a", "deserved")}
    stale = plan_cycle(queues(), forecast(NOW - pd.Timedelta(hours=3)), SETTINGS, now=NOW)
    assert stale.hold is not None and stale.hold[0] == "stale_data" and stale.plan.changes == ()
    assert {h.code for h in stale.plan.held} == {"stale_data"}


def test_a_hold_found_before_planning_wins_and_no_target_is_computed() -> None:
    broken = forecast(NOW).drop(columns=["hi-80"])  # would be an error if targets were computed
    planned = plan_cycle(queues(), broken, SETTINGS, now=NOW, hold=("missing_model", "no champion"))
    assert planned.hold == ("missing_model", "no champion") and planned.plan.changes == ()
    nothing = plan_cycle(queues(), None, SETTINGS, now=NOW)
    assert nothing.hold is None and {h.code for h in nothing.plan.held} == {"no_forecast"}


def test_stale_series_judges_each_queue_by_its_own_newest_sample() -> None:
    rows = [
        ("team-a", NOW - pd.Timedelta(hours=20)),
        ("team-a", NOW - pd.Timedelta(hours=21)),
        ("team-b", NOW - pd.Timedelta(hours=2)),
        ("team-b", NOW - pd.Timedelta(hours=30)),
    ]
    history = pd.DataFrame({"series_id": [q for q, _ in rows], "timestamp": [t for _, t in rows], "value": 1.0})
    stale = stale_series(history, SETTINGS, now=NOW)
    assert set(stale) == {"team-a"} and "20.0 h old" in stale["team-a"]  # team-b: exactly at the limit


def test_capacity_drop_rule_boundaries() -> None:
    gpu = "nvidia.com/gpu"
    assert capacity_drop({gpu: 96.0}, {gpu: 48.0}, SETTINGS) is None  # exactly 50 %: not more than the rule
    assert capacity_drop({gpu: 96.0}, {gpu: 47.0}, SETTINGS) == (
        "capacity_drop",
        "live allocatable nvidia.com/gpu fell from 96 to 47 (more than 50%)",
    )
    assert capacity_drop(None, {gpu: 8.0}, SETTINGS) is None  # no reference yet: nothing to compare
    assert capacity_drop(None, {gpu: 0.0}, SETTINGS) is not None  # zero always holds
    assert capacity_drop({gpu: 96.0}, {gpu: 200.0}, SETTINGS) is None  # growth never holds
    strict = PlannerSettings(capacity_drop_hold=0.2)  # type: ignore[call-arg]
    assert capacity_drop({gpu: 100.0}, {gpu: 79.0}, strict) is not None
