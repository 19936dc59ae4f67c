"""``bench.experiments.replay_anchor``: plans pulled from the loop's toward static elastic quotas' shares."""

from __future__ import annotations

import pandas as pd
import pytest

from bench.experiments.replay_anchor import anchored, replay_anchored, weights_of
from bench.replay import FlagError
from predictor.replay import ReplaySettings, replay
from predictor.sim import Quota
from tests.support.hourly_jobs import hourly_jobs

START = pd.Timestamp("2026-03-02", tz="UTC")


def test_a_plan_is_pulled_toward_the_anchor_in_whole_gpus_and_its_guarantee_kept_within_it() -> None:
    planned = {"a": Quota(deserved=10.0, capability=16.0, guarantee=6.0), "b": Quota(2.0, 16.0, 0.0)}
    anchor = {"a": 4.0, "b": 12.0}
    assert anchored(planned, anchor, 0.0) == planned
    assert anchored(planned, anchor, 1.0) == {"a": Quota(4.0, 16.0, 4.0), "b": Quota(12.0, 16.0, 0.0)}
    # 8.5 and 4.5 round half to even
    assert anchored(planned, anchor, 0.25) == {"a": Quota(8.0, 16.0, 6.0), "b": Quota(4.0, 16.0, 0.0)}


def _jobs() -> pd.DataFrame:
    # The week before: a and b used the cluster equally (static shares 8 and 8 of 16). In the replay a asks for
    # 12 GPUs for a day, b for 2 GPUs, so the loop's plan moves deserved away from the static shares.
    history = [(-100 + i, q, 8, 0.5) for i in range(0, 20, 2) for q in ("a", "b")]
    rows = [*history, *[(0, "a", 4, 24)] * 3, (0, "b", 2, 24)]
    return hourly_jobs(rows, START)


def test_weight_zero_is_the_loop_and_weight_one_holds_the_static_shares() -> None:
    jobs = _jobs()
    settings = ReplaySettings(nodes=2, start=START, weeks=1 / 7, policy="loop", forecaster="naive")
    loop = replay(jobs, settings)
    assert replay_anchored(jobs, settings, 0.0).summary == loop.summary
    assert loop.schedule is not None and {tuple(row) for row in loop.schedule.deserved} != {(8.0, 8.0)}
    held = replay_anchored(jobs, settings, 1.0).schedule
    assert held is not None and {tuple(row) for row in held.deserved} == {(8.0, 8.0)}


@pytest.mark.parametrize("text", ["", "0.5,x", "1.5", "-0.1"])
def test_weights_outside_zero_to_one_are_one_clear_error(text: str) -> None:
    with pytest.raises(FlagError, match="--weights"):
        weights_of(text)
