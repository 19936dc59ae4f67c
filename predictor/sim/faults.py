"""Fault injection with ground-truth labels, one kind per root cause the diagnosis tree names.

Each fault is planned once (where, when, how strong: all drawn from the seed) and then shapes the
metrics the way that failure really shows up, so a decision tree trained on the output learns real
signatures rather than artefacts:

- thermal → hot GPU, SM clock down, utilisation down, throttle reasons 0x20 (+0x40|0x8 when severe);
- power cap → power pinned at a limit, clocks down, throttle reason 0x4;
- XID → the code in ``DCGM_FI_DEV_XID_ERRORS`` (48/94 also count an ECC DBE) and the gang hangs;
- NVLink → CRC errors up, NVLink traffic and utilisation down;
- OOM → GPU memory climbs to the top, then the container exits and restarts (reason ``Error``: a CUDA
  OOM is not a cgroup OOMKill);
- congestion → retransmits and drops up on the job's nodes, utilisation down on all its GPUs;
- I/O stall → utilisation sawtooth with iowait up;
- CPU contention → user CPU and load up, jittery utilisation;
- RoCE PFC storm → PFC pause frames (``node_ethtool_{rx,tx}_prio3_pause``) many times their usual rate on
  the job's nodes, utilisation down on all its GPUs, TCP untouched (RDMA bypasses it);
- RoCE congestion → ECN-marked RoCE packets and CNPs up (``node_ethtool_np_ecn_marked_roce_packets``,
  ``node_ethtool_np_cnp_sent``, ``node_ethtool_rp_cnp_handled``), utilisation down, no pause storm;
- NIC link flap → ``node_network_carrier_changes_total`` steps on one node, drops, the gang stalls.

NVLink faults also raise the replay/recovery counters and, when strong, XID 74 (an NVLink error), which
is what the root-cause tree uses to tell them from other GPU faults.

``node_not_ready`` and ``scheduling_starvation`` act through the scheduler (node lost, quota cut)
before any metric is generated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from predictor.sim.series import StepGrid, epoch_s

__all__ = ["CAUSES", "FaultPlan", "faults_frame", "plan_job_faults", "plan_scheduler_faults"]

CAUSES = (
    "gpu_thermal",
    "gpu_power_cap",
    "gpu_hardware",
    "nvlink",
    "gpu_oom",
    "network_congestion",
    "io_stall",
    "cpu_contention",
    "scheduling_starvation",
    "node_not_ready",
    "roce_pfc_storm",
    "roce_congestion",
    "nic_link_flap",
)
# Drawn from their own random stream, after the first ten, so adding them moved no existing fault.
NETWORK_CAUSES = ("roce_pfc_storm", "roce_congestion", "nic_link_flap")
SCHEDULER_CAUSES = ("scheduling_starvation", "node_not_ready")
XID_CODES = (48, 63, 64, 79, 94)
_MARGIN_S = 3600  # quiet time kept around a fault on the same node
# Minutes a fault of each cause lasts (uniform between the bounds).
_DURATION_MIN = {
    "gpu_thermal": (20, 120),
    "gpu_power_cap": (30, 180),
    "gpu_hardware": (15, 60),
    "nvlink": (20, 120),
    "gpu_oom": (20, 60),
    "network_congestion": (15, 90),
    "io_stall": (20, 90),
    "cpu_contention": (20, 90),
    "scheduling_starvation": (60, 240),
    "node_not_ready": (20, 120),
    "roce_pfc_storm": (15, 60),
    "roce_congestion": (20, 90),
    "nic_link_flap": (15, 45),
}


@dataclass
class FaultPlan:
    """One injected fault. ``gpu``/``node`` are global indices (-1 when not applicable)."""

    fault_id: int
    cause: str
    start_s: int
    end_s: int
    node: int = -1
    gpu: int = -1
    queue: str = ""
    job_id: str = ""
    attempt: int = -1
    job_gpus: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    job_nodes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    xid: int = 0
    strength: float = 0.5  # cause-specific intensity in [0, 1]
    detail: str = ""
    onset: str = "step"  # how the symptom unfolds (``predictor.sim.onsets``)
    amplitude: float = 1.0  # share of the full symptom the continuous series show

    def steps(self, grid: StepGrid) -> tuple[int, int]:
        return grid.step_range(self.start_s, self.end_s)


def _count(rate_per_day: float, grid: StepGrid, rng: np.random.Generator) -> int:
    days = grid.n_steps * grid.step_s / 86400
    return int(rng.poisson(rate_per_day * days)) if rate_per_day > 0 else 0


def _duration_s(cause: str, grid: StepGrid, rng: np.random.Generator) -> int:
    lo, hi = _DURATION_MIN[cause]
    # At least five samples, so a fault is visible (and has a rate) at any step.
    return max(int(rng.uniform(lo, hi) * 60), 5 * grid.step_s)


def _causes(n: int, rng: np.random.Generator) -> list[str]:
    return [str(c) for c in rng.choice(np.array(CAUSES[: len(CAUSES) - len(NETWORK_CAUSES)]), size=n)]


def plan_scheduler_faults(
    rate_per_day: float, grid: StepGrid, n_nodes: int, queues: list[str], seed: int
) -> tuple[list[FaultPlan], list[str]]:
    """Draw all fault causes; return the scheduler-level plans and the causes left for jobs."""
    rng = np.random.default_rng([seed, 0xFA17])
    causes = _causes(_count(rate_per_day, grid, rng), rng)
    net_rng = np.random.default_rng([seed, 0xAE7])
    share = len(NETWORK_CAUSES) / (len(CAUSES) - len(NETWORK_CAUSES))
    extra = [str(c) for c in net_rng.choice(np.array(NETWORK_CAUSES), size=_count(rate_per_day * share, grid, net_rng))]
    plans: list[FaultPlan] = []
    rest: list[str] = []
    span = grid.n_steps * grid.step_s
    for cause in causes:
        if cause not in SCHEDULER_CAUSES:
            rest.append(cause)
            continue
        dur = _duration_s(cause, grid, rng)
        start = grid.start_s + int(rng.uniform(0, max(span - dur, 1)))
        plan = FaultPlan(len(plans), cause, start, start + dur, strength=float(rng.uniform(0.3, 1.0)))
        if cause == "node_not_ready":
            plan.node = int(rng.integers(n_nodes))
            plan.detail = "kubelet stopped posting status"
        else:
            plan.queue = str(rng.choice(np.array(queues)))
            plan.detail = "queue capability cut to 0"
        # Two overlapping faults on one queue (or node) restore in the wrong order: the second saves the
        # cut quota (0) and puts it back after both ended, so windows labelled healthy had capability 0.
        # The overlapping one is dropped after its draws, so every other fault stays where it was.
        if not any(_overlap(plan, p) for p in plans):
            plan.fault_id = len(plans)
            plans.append(plan)
    return plans, rest + extra


def _overlap(a: FaultPlan, b: FaultPlan) -> bool:
    """Same cause on the same queue or node, with intersecting spans."""
    return a.cause == b.cause and (a.queue, a.node) == (b.queue, b.node) and a.start_s < b.end_s and b.start_s < a.end_s


def plan_job_faults(
    causes: list[str],
    attempts: pd.DataFrame,
    attempt_gpus: list[np.ndarray],
    gpus_used: np.ndarray,
    grid: StepGrid,
    gpus_per_node: int,
    seed: int,
    first_id: int = 0,
    earlier: list[FaultPlan] | None = None,
) -> list[FaultPlan]:
    """Place GPU/job faults on attempts running at a random time.

    Each attempt is faulted at most once, and faults on the same node stay an hour apart (``earlier``
    node faults included), so every labelled window has one cause and a clean baseline before it.
    """
    rng = np.random.default_rng([seed, 0xB0B])
    start = epoch_s(attempts["start"])
    end = epoch_s(attempts["end"])
    ngpu = attempts["num_gpus"].to_numpy()
    job_index = attempts["job_index"].to_numpy()
    taken: set[int] = set()
    plans: list[FaultPlan] = []
    node_of = [np.unique(gpus // gpus_per_node) for gpus in attempt_gpus]
    blocked: list[tuple[set[int], int, int]] = [
        ({p.node}, p.start_s - _MARGIN_S, p.end_s + _MARGIN_S) for p in (earlier or []) if p.node >= 0
    ]

    def clashes(a: int, t0: int, t1: int) -> bool:
        nodes = set(node_of[a].tolist())
        return any(lo < t1 and t0 < hi and nodes & used for used, lo, hi in blocked)

    span = grid.n_steps * grid.step_s
    for cause in causes:
        dur = _duration_s(cause, grid, rng)
        for _ in range(20):  # a few tries to land on a running job long enough
            t = grid.start_s + int(rng.uniform(0, max(span - dur, 1)))
            running = (start <= t) & (end >= t + dur) & ~np.isin(np.arange(len(start)), list(taken))
            if (
                cause in ("network_congestion", "roce_pfc_storm", "roce_congestion")
                and (running & (ngpu > gpus_per_node)).any()
            ):
                running &= ngpu > gpus_per_node
            if cause == "nvlink" and (running & (ngpu > 1)).any():
                running &= ngpu > 1
            candidates = [int(a) for a in np.flatnonzero(running) if not clashes(int(a), t, t + dur)]
            if candidates:
                break
        else:
            continue
        a = int(rng.choice(candidates))
        taken.add(a)
        blocked.append((set(node_of[a].tolist()), t - _MARGIN_S, t + dur + _MARGIN_S))
        used = attempt_gpus[a][: int(gpus_used[job_index[a]])]
        gpu = int(rng.choice(used))
        plan = FaultPlan(
            first_id + len(plans),
            cause,
            t,
            t + dur,
            node=gpu // gpus_per_node,
            gpu=gpu,
            queue=str(attempts["queue"].iloc[a]),
            job_id=str(attempts["job_id"].iloc[a]),
            attempt=a,
            job_gpus=used,
            job_nodes=np.unique(used // gpus_per_node),
            strength=float(rng.uniform(0.3, 1.0)),
        )
        if cause == "gpu_hardware":
            plan.xid = int(rng.choice(np.array(XID_CODES)))
            plan.detail = f"XID {plan.xid}"
        if cause == "nvlink" and plan.strength > 0.6:
            plan.xid, plan.detail = 74, "XID 74 (NVLink error)"
        plans.append(plan)
    return plans


def faults_frame(plans: list[FaultPlan], node_names: list[str], gpus_per_node: int) -> pd.DataFrame:
    """The ground-truth table: one row per fault (start, end, node, gpu, job, queue, cause)."""
    rows = []
    for p in plans:
        rows.append(
            {
                "fault_id": p.fault_id,
                "cause": p.cause,
                "start": pd.Timestamp(p.start_s, unit="s", tz="UTC"),
                "end": pd.Timestamp(p.end_s, unit="s", tz="UTC"),
                "node": node_names[p.node] if p.node >= 0 else "",
                "gpu": str(p.gpu % gpus_per_node) if p.gpu >= 0 else "",
                "job_id": p.job_id,
                "queue": p.queue,
                "nodes": ",".join(node_names[n] for n in p.job_nodes) if len(p.job_nodes) else "",
                "xid": p.xid,
                "strength": round(p.strength, 3),
                "onset": p.onset,
                "amplitude": round(p.amplitude, 3),
                "detail": p.detail,
            }
        )
    columns = [
        "fault_id",
        "cause",
        "start",
        "end",
        "node",
        "gpu",
        "job_id",
        "queue",
        "nodes",
        "xid",
        "strength",
        "onset",
        "amplitude",
        "detail",
    ]
    frame = pd.DataFrame(rows, columns=columns)
    if frame.empty:
        frame["start"] = pd.Series(dtype="datetime64[ns, UTC]")
        frame["end"] = pd.Series(dtype="datetime64[ns, UTC]")
    return frame
