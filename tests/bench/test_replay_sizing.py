"""``bench.replay``'s cluster sizing: the ``drain`` rule is the smallest cluster on which the fluid,
work-conserving scheduler leaves no backlog at the end, never below the ``mean`` rule; ``mean`` is kept as it
was. On a trace whose demand grows, ``mean`` leaves work that no scheduler can start."""

from __future__ import annotations

import pandas as pd
import pytest

from bench import replay
from predictor import sim
from tests.support.hourly_jobs import hourly_jobs

START = pd.Timestamp("2026-03-02", tz="UTC")
END = START + pd.Timedelta(days=4)


def _growing() -> pd.DataFrame:
    """1-GPU jobs of 1 h, 8 an hour for the first 3 days, then 40 an hour on the last day: demand grows."""
    rows = [(h, "a", 1, 1.0) for h in range(-24, 72) for _ in range(8)]
    rows += [(h, "b", 1, 1.0) for h in range(72, 96) for _ in range(40)]
    return hourly_jobs(rows, START)


def test_drain_is_the_smallest_cluster_whose_fluid_backlog_empties() -> None:
    jobs = _growing()
    mean = replay.sized_nodes(jobs, START, END, 0.95, 8, "mean")
    drain = replay.sized_nodes(jobs, START, END, 0.95, 8, "drain")
    demand = replay.hourly_demand(jobs, START, END)
    left = {n: float(replay.fluid(demand, n * 8)[1].iloc[-1]) for n in (mean, drain - 1, drain)}
    assert drain > mean  # the last day's 40 GPUs an hour do not fit on the mean rule's cluster
    assert left[mean] >= 1.0 and left[drain - 1] >= 1.0
    assert left[drain] < 1.0
    assert drain == 5  # 40 GPUs an hour on 8-GPU nodes


def test_drain_never_below_the_mean_rule_and_flat_demand_keeps_it() -> None:
    rows = [(h, "a", 1, 1.0) for h in range(-24, 96) for _ in range(30)]
    frame = pd.DataFrame(rows, columns=["submit_h", "queue", "num_gpus", "duration_h"])
    frame["submit_time"] = (START + pd.to_timedelta(frame.pop("submit_h"), unit="h")).astype(str)
    frame["duration_s"] = frame.pop("duration_h") * 3600
    jobs = sim.normalise_jobs(frame)
    assert (
        replay.sized_nodes(jobs, START, END, 0.95, 8, "drain")
        == replay.sized_nodes(jobs, START, END, 0.95, 8, "mean")
        == 4
    )


def test_an_unknown_sizing_rule_is_named() -> None:
    with pytest.raises(ValueError, match="sizing: 'peak'"):
        replay.sized_nodes(_growing(), START, END, 0.95, 8, "peak")
