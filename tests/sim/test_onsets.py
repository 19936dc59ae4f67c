"""Fault onsets: ramps, bursts and partial amplitude bend the series between healthy and the full fault."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from predictor import sim
from predictor.sim.dcgm import DcgmGenerator
from predictor.sim.faults import FaultPlan
from predictor.sim.onsets import SHAPED_CAUSES, envelope

START = pd.Timestamp("2026-03-02", tz="UTC")
STEP_S = 60


def _run(onsets: bool) -> sim.SimResult:
    jobs = sim.synthetic_jobs(START - pd.Timedelta(days=1), START + pd.Timedelta(days=1), seed=6, jobs_per_hour=30)
    settings = sim.SimSettings(
        start=START, weeks=0.5 / 7, step_s=STEP_S, seed=6, fault_rate_per_day=150, warmup_days=1, fault_onsets=onsets
    )
    return sim.simulate(jobs, sim.ClusterSpec.uniform(8), settings)


@pytest.fixture(scope="module")
def runs() -> tuple[sim.SimResult, sim.SimResult]:
    return _run(False), _run(True)


def test_envelopes_have_the_shape_their_name_says() -> None:
    plan = FaultPlan(3, "gpu_thermal", 0, 3600)
    assert (envelope(plan, 30, seed=1) == 1).all()
    plan.onset = "ramp"
    ramp = envelope(plan, 30, seed=1)
    assert ramp[0] == pytest.approx(0.1) and ramp[-1] == pytest.approx(1.0) and (np.diff(ramp) > 0).all()
    plan.onset = "intermittent"
    bursts = envelope(plan, 60, seed=1)
    assert bursts[0] == 1 and set(np.unique(bursts)) == {0.0, 1.0}
    assert (bursts == 0).sum() >= 3  # off for a burst's length at least


def test_without_the_setting_every_fault_is_a_full_step(runs: tuple[sim.SimResult, sim.SimResult]) -> None:
    plain, _ = runs
    assert set(plain.faults["onset"]) == {"step"} and (plain.faults["amplitude"] == 1.0).all()


def test_onsets_move_no_scheduler_fault_and_shape_only_level_causes(runs: tuple[sim.SimResult, sim.SimResult]) -> None:
    plain, shaped = runs
    # A partial quota cut changes the schedule, so job faults may land on other jobs; the cuts and lost
    # nodes themselves are drawn before the schedule runs and stay where they were.
    key = ["cause", "start", "end", "node", "queue", "strength"]
    scheduler = ["scheduling_starvation", "node_not_ready"]
    mine = plain.faults[plain.faults["cause"].isin(scheduler)][key].reset_index(drop=True)
    pd.testing.assert_frame_equal(
        mine, shaped.faults[shaped.faults["cause"].isin(scheduler)][key].reset_index(drop=True)
    )
    level = shaped.faults["cause"].isin(SHAPED_CAUSES)
    assert set(shaped.faults.loc[level, "onset"]) == {"step", "ramp", "intermittent"}
    assert shaped.faults.loc[level, "amplitude"].between(0.35, 1.0).all()
    assert (shaped.faults.loc[~level, "onset"] == "step").all()  # hangs, crashes, lost nodes, cut quotas


def _gpu_row(result: sim.SimResult, quantity: str, gpu: int) -> np.ndarray:
    return np.asarray(DcgmGenerator(result.occupancy).matrix(quantity)[gpu])


def _gpu_index(result: sim.SimResult, fault: pd.Series) -> int:
    return int(result.cluster.node_names().index(fault["node"])) * result.cluster.gpus_per_node + int(fault["gpu"])


def _steps(result: sim.SimResult, fault: pd.Series) -> tuple[int, int]:
    return result.grid.step_range(int(fault["start"].timestamp()), int(fault["end"].timestamp()))


def test_a_milder_thermal_fault_is_as_hot_but_slows_the_gpu_less(runs: tuple[sim.SimResult, sim.SimResult]) -> None:
    plain, shaped = runs
    faults = shaped.faults
    mild = faults[(faults["cause"] == "gpu_thermal") & (faults["onset"] == "step") & (faults["amplitude"] < 0.8)]
    assert len(mild), "the run should hold a milder thermal fault"
    fault = mild.iloc[0]
    g = _gpu_index(shaped, fault)
    k0, k1 = _steps(shaped, fault)
    # a GPU throttles for heat only once it is hot: as hot as the full fault
    np.testing.assert_allclose(_gpu_row(shaped, "temp", g)[k0:k1], _gpu_row(plain, "temp", g)[k0:k1])
    full_clock, mild_clock = _gpu_row(plain, "clock", g)[k0:k1], _gpu_row(shaped, "clock", g)[k0:k1]
    before = np.median(_gpu_row(shaped, "clock", g)[k0 - 20 : k0 - 1])
    assert np.median(full_clock) < np.median(mild_clock) < before  # slowed, less than in full
    throttle = _gpu_row(shaped, "throttle", g)[k0:k1]
    assert set(np.unique(throttle)) <= {0.0, 1.0, 32.0, 104.0}  # reason codes, never blends of them


def test_a_ramped_fault_grows_over_its_span(runs: tuple[sim.SimResult, sim.SimResult]) -> None:
    _, shaped = runs
    ramp = shaped.faults[(shaped.faults["cause"] == "gpu_thermal") & (shaped.faults["onset"] == "ramp")]
    assert len(ramp), "the run should hold a ramped thermal fault"
    fault = ramp.iloc[0]
    g = _gpu_index(shaped, fault)
    k0, k1 = _steps(shaped, fault)
    temp = _gpu_row(shaped, "temp", g)[k0:k1]
    third = max(1, (k1 - k0) // 3)
    assert temp[-third:].mean() > temp[:third].mean() + 5


def test_a_partial_quota_cut_leaves_the_queue_part_of_what_it_held(runs: tuple[sim.SimResult, sim.SimResult]) -> None:
    _, shaped = runs
    sched = shaped.schedule
    cuts = shaped.faults[shaped.faults["cause"] == "scheduling_starvation"]
    left = []
    for fault in cuts.itertuples():
        qi = sched.queue_names.index(fault.queue)
        at = int(np.searchsorted(sched.quota_s, int(fault.start.timestamp()), side="right")) - 1
        held = sched.allocated[int(np.searchsorted(sched.timeline_s, int(fault.start.timestamp()))) - 1, qi]
        cap = sched.capability[at, qi]
        assert cap <= held * (1 - fault.amplitude) + 1e-9  # never more than the drawn share of its use
        left.append(cap)
    assert len(left) and max(left) > 0  # not every cut is to zero
