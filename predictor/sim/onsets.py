"""How a fault's symptom unfolds over its span: a step, a ramp or bursts, at full or partial strength.

Real faults rarely switch on at full strength and stay there: a fan degrades and a GPU heats over an hour, a
link flaps in bursts, a power cap bites by a few per cent. A root-cause tree trained only on step faults at
full strength learns thresholds halfway between healthy and blatant, and answers ``healthy`` for the milder
ones. With ``SimSettings.fault_onsets`` each fault of a cause whose symptom is a level (not an event: a hang,
a crash loop, a lost node or a cut quota) draws an onset and an amplitude from a random stream of their own, so
no other draw changes (a partial quota cut does change the schedule, and so which jobs the job faults land on):

- ``step``: the symptom holds from start to end (the only onset without the setting);
- ``ramp``: it grows linearly from a tenth to full over the fault;
- ``intermittent``: on and off in bursts of 3-15 steps, on first.

The amplitude (0.35-1) scales how far each continuous series moves from its healthy value, but for a
thermal fault's temperature: a GPU throttles for heat only once it is hot, so a milder one slows less and is
not cooler. Codes and flags (an XID, throttle reasons, a carrier change) are not scaled: they show while the
envelope is at least half on. A quota cut (starvation) has no onset; its amplitude leaves the queue
``1 - amplitude`` of the GPUs it holds as its capability, not always none.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from predictor.sim.faults import FaultPlan

__all__ = ["GATED", "ONSETS", "PARTIAL_CAUSES", "SHAPED_CAUSES", "draw_onsets", "envelope", "shaped"]

ONSETS = ("step", "ramp", "intermittent")
SHAPED_CAUSES = frozenset(
    (
        "gpu_thermal",
        "gpu_power_cap",
        "nvlink",
        "network_congestion",
        "io_stall",
        "cpu_contention",
        "roce_pfc_storm",
        "roce_congestion",
        "nic_link_flap",
    )
)
# A quota cut has no onset, but it may leave part of the queue's use: capability cut to (1 - amplitude)
# of what the queue holds when it starts, not always to zero.
PARTIAL_CAUSES = frozenset(("scheduling_starvation",))
# Families holding codes or events: present or not, never a fraction of one.
GATED = frozenset(("xid", "throttle", "carrier_rate"))
# A GPU throttles for heat only once it is hot: a milder thermal fault slows it less, it is not cooler.
UNSCALED = frozenset((("gpu_thermal", "temp"),))
_AMPLITUDE = (0.35, 1.0)


def draw_onsets(plans: list[FaultPlan], seed: int, stream: int) -> None:
    """Give each shaped fault of ``plans`` an onset and an amplitude (in place, from a stream of its own:
    scheduler faults are drawn before the schedule runs, job faults after, each from its own ``stream``)."""
    rng = np.random.default_rng([seed, 0x0E5E7, stream])
    for plan in plans:
        onset = str(rng.choice(np.array(ONSETS)))
        amplitude = float(rng.uniform(*_AMPLITUDE))
        if plan.cause in SHAPED_CAUSES:  # drawn for every plan, so the draws do not depend on the causes
            plan.onset, plan.amplitude = onset, amplitude
        elif plan.cause in PARTIAL_CAUSES:
            plan.amplitude = amplitude


def envelope(plan: FaultPlan, n: int, seed: int) -> np.ndarray:
    """How much of the symptom shows at each of the fault's ``n`` steps (0-1, before the amplitude); bursts
    drawn from the run's ``seed`` and the fault, the same in every family the fault touches."""
    if plan.onset == "ramp":
        return np.linspace(0.1, 1.0, n, dtype=np.float32)
    if plan.onset == "intermittent":
        rng = np.random.default_rng([seed, plan.fault_id, 0xB0257])
        out = np.zeros(n, dtype=np.float32)
        k, on = 0, True
        while k < n:
            length = int(rng.integers(3, 16))
            out[k : k + length] = 1.0 if on else 0.0
            k, on = k + length, not on
        return out
    return np.ones(n, dtype=np.float32)


@contextmanager
def shaped(name: str, m: np.ndarray, rows: np.ndarray, k0: int, k1: int, plan: FaultPlan, seed: int) -> Iterator[None]:
    """Around writing ``plan``'s effect in full into ``m[rows, k0:k1]`` (family ``name``): afterwards pull it
    back towards the values before as the plan's onset and amplitude say (nothing to do for a full step)."""
    rows = rows.astype(np.int64)
    before = m[rows, k0:k1].copy() if plan.onset != "step" or plan.amplitude < 1.0 else None
    yield
    if before is not None:
        _blend(name, m, rows, k0, k1, before, plan, seed)


def _blend(
    name: str, m: np.ndarray, rows: np.ndarray, k0: int, k1: int, before: np.ndarray, plan: FaultPlan, seed: int
) -> None:
    shape = envelope(plan, k1 - k0, seed)[None, :]
    after = m[rows, k0:k1]
    if name in GATED:
        m[rows, k0:k1] = np.where(shape >= 0.5, after, before)
    else:
        amplitude = 1.0 if (plan.cause, name) in UNSCALED else plan.amplitude
        m[rows, k0:k1] = before + (amplitude * shape) * (after - before)
