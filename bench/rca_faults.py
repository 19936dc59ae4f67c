"""Fault scenarios for scoring root-cause models, drawn independently of the training simulator.

The training simulator (``predictor.sim.faults``) hits one GPU or one job at a time, with a fixed envelope,
its own magnitudes and an hour of quiet around each fault; its windows are labelled only when a fault covers
half of them, and the peers of a hung gang are dropped as ambiguous. A model scored only on those faults is
scored on the signatures it was trained on. Here every cause gets other magnitudes and onsets:

- onsets: a step, a ramp (the symptom grows over the fault), or intermittent (on and off in bursts);
- partial GPUs: a thermal or power-cap fault on one to three GPUs of a node, not always one;
- XID codes the training simulator never draws (31, 43, 45, 92, 95), shown for only part of the fault;
- starvation as a partial quota cut (capability down to a fraction of use), not only a cut to zero;
- a node gone NotReady while its exporters keep answering, as well as one gone dark;
- overlapping faults: faults on other nodes at the same time, no quiet margin between them;
- cascades: an NVLink error, then the job hangs, then its pods restart over and over (one root cause);
- windows a fault covers only partly (a quarter or more) kept and labelled, peers of a hung gang kept.

Labelling (``label_rows``): a candidate touched by a fault covering at least ``MIN_COVER`` of the window is
labelled with the fault's cause; ``role`` says whether it is the culprit (the node or queue a finding should
name) or a peer (a node of the job that only waits on the culprit), and ``cover`` how much of the window the
fault spans. A candidate touched more faintly, or only in the preceding window (its baseline is faulty), is
dropped; every other candidate is healthy. Pure planning and labelling: the metrics are bent by
``bench.rca_inject``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from models.rca import CAUSES, HEALTHY
from models.rca_window import WindowData, col, node_of

__all__ = ["JOB_WIDE", "MIN_COVER", "PEER_WAITS", "Fault", "Job", "label_rows", "plan_faults", "running_jobs"]

MIN_COVER = 0.25
# Causes a finding names per job (``predictor diagnose`` merges them by job): every node of the job is a culprit.
JOB_WIDE = frozenset(
    ("nvlink", "gpu_oom", "network_congestion", "io_stall", "cpu_contention", "roce_pfc_storm", "roce_congestion")
)
# Node causes whose job's other nodes stall waiting on the culprit: kept as peers (the training set drops them).
PEER_WAITS = frozenset(("gpu_hardware", "nic_link_flap"))
SHAPES = ("step", "ramp", "intermittent")
HANG_XIDS = (31, 43, 45, 48, 64, 79, 94, 95)
OTHER_XIDS = (63, 92)
_NETWORK = ("network_congestion", "roce_pfc_storm", "roce_congestion")
_POD_SUFFIX = re.compile(r"(-(worker|master|launcher|ps|chief|task))?-\d+$")


@dataclass(frozen=True)
class Job:
    """A running job seen in the GPU series: its pods and GPUs, and the steps all of them are held."""

    name: str
    namespace: str
    pods: tuple[str, ...]
    gpus: tuple[tuple[str, str], ...]  # (node, gpu)
    first: int
    last: int  # inclusive

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted({n for n, _ in self.gpus}))


@dataclass(frozen=True)
class Fault:
    """One injected fault over steps ``[start, end)`` of the window data's time axis."""

    fault_id: int
    cause: str
    start: int
    end: int
    node: str = ""
    gpus: tuple[str, ...] = ()  # GPUs of ``node`` the fault acts on
    job: Job | None = None
    queue: str = ""
    strength: float = 0.5
    shape: str = "step"
    phase: str = ""  # cascade phase: "nvlink", "hang" or "restarts"
    xid: int = 0
    dark: bool = True  # node_not_ready: its exporters stop answering too
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def job_nodes(self) -> tuple[str, ...]:
        return self.job.nodes if self.job else ()

    def culprits(self) -> set[str]:
        """The nodes (or the queue) a right finding names."""
        if self.cause == "scheduling_starvation":
            return {self.queue}
        if self.cause in JOB_WIDE and self.job_nodes:
            return set(self.job_nodes)
        return {self.node}

    def peers(self) -> set[str]:
        hangs = self.cause in PEER_WAITS and (self.cause != "gpu_hardware" or self.xid in HANG_XIDS)
        return set(self.job_nodes) - {self.node} if hangs else set()


def running_jobs(data: WindowData) -> list[Job]:
    """Jobs holding GPUs, from the utilisation series' pod labels (and ``kube_pod_labels`` for job names)."""
    util = data.tables.get("DCGM_FI_DEV_GPU_UTIL")
    if util is None:
        return []
    names: dict[tuple[str, str], str] = {}
    labels = data.tables.get("kube_pod_labels")
    if labels is not None and "label_volcano_sh_job_name" in labels.labels.columns:
        lab = labels.labels
        names = dict(
            zip(
                zip(col(lab, "namespace"), col(lab, "pod"), strict=True),
                col(lab, "label_volcano_sh_job_name"),
                strict=True,
            )
        )
    lab = util.labels
    finite = np.isfinite(util.values)
    frame = pd.DataFrame(
        {"node": node_of(lab), "gpu": col(lab, "gpu"), "ns": col(lab, "namespace"), "pod": col(lab, "pod")}
    )
    frame["job"] = [names.get((ns, p), _POD_SUFFIX.sub("", p)) for ns, p in zip(frame["ns"], frame["pod"], strict=True)]
    jobs = []
    for (ns, job), part in frame[frame["pod"] != ""].groupby(["ns", "job"]):
        held = finite[:, part.index.to_numpy()].all(axis=1)
        if not held.any():
            continue
        steps = np.flatnonzero(held)
        # The longest run of steps every GPU of the job is held (a retried job leaves gaps).
        breaks = np.flatnonzero(np.diff(steps) > 1)
        starts, ends = np.r_[steps[0], steps[breaks + 1]], np.r_[steps[breaks], steps[-1]]
        i = int(np.argmax(ends - starts))
        gpus = tuple(sorted(set(zip(part["node"], part["gpu"], strict=True))))
        jobs.append(Job(str(job), str(ns), tuple(sorted(set(part["pod"]))), gpus, int(starts[i]), int(ends[i])))
    return jobs


def plan_faults(data: WindowData, seed: int, n_faults: int, window_steps: int, cascades: int = 1) -> list[Fault]:
    """``n_faults`` faults (causes cycled so each appears about equally) plus ``cascades`` NVLink cascades.

    A node holds at most one fault at a time (so its label is one cause), but faults on other nodes overlap
    freely; a fault starts at least two windows into the run so its baseline window exists.
    """
    rng = np.random.default_rng([seed, 0x1DE9])
    jobs = running_jobs(data)
    n_steps = len(data.times)
    step_s = float(np.median(np.diff(data.times))) / 1e9 if n_steps > 1 else 60.0
    cap = data.tables.get("volcano_queue_allocated_scalar_resources")
    queues = sorted(set(col(cap.labels, "queue_name"))) if cap is not None else []
    nodes = (
        sorted(set(node_of(data.tables["kube_node_status_condition"].labels)))
        if "kube_node_status_condition" in data.tables
        else []
    )
    busy: list[tuple[set[str], int, int]] = []
    faults: list[Fault] = []
    # Cascades first: they need a long-running multi-GPU job and two free hours on its nodes.
    causes = ["cascade"] * cascades + [str(c) for c in rng.permutation(np.resize(np.array(CAUSES), n_faults))]

    def free(where: set[str], k0: int, k1: int) -> bool:
        return not any(where & used and lo < k1 + window_steps and k0 < hi + window_steps for used, lo, hi in busy)

    for cause in causes:
        for _ in range(40):
            minutes = rng.uniform(10, 75) if cause != "cascade" else rng.uniform(60, 120)
            length = max(4, int(minutes * 60 / step_s))
            k0 = int(rng.integers(2 * window_steps, max(2 * window_steps + 1, n_steps - length)))
            k1 = min(k0 + length, n_steps)
            # A starved queue is one with work running: its quota cut shows against its use.
            used = (
                {}
                if cap is None
                else dict(zip(col(cap.labels, "queue_name"), np.nan_to_num(cap.values[k0]), strict=True))
            )
            fault = _draw(cause, used, rng, jobs, queues, nodes, k0, k1, len(faults))
            if fault is None:
                continue
            where = {fault[0].queue} if cause == "scheduling_starvation" else set(fault[0].job_nodes) | {fault[0].node}
            if free(where, k0, k1):
                busy.append((where, k0, k1))
                faults.extend(fault)
                break
    return faults


def _draw(
    cause: str,
    used: dict[str, float],
    rng: np.random.Generator,
    jobs: list[Job],
    queues: list[str],
    nodes: list[str],
    k0: int,
    k1: int,
    fid: int,
) -> list[Fault] | None:
    strength = float(rng.uniform(0.2, 1.0))
    shape = str(rng.choice(np.array(SHAPES), p=[0.4, 0.3, 0.3]))
    if cause == "scheduling_starvation":
        if not queues:
            return None
        q = str(rng.choice(np.array(queues if not used else [q for q in queues if used.get(q, 0) > 0] or queues)))
        return [
            Fault(
                fid,
                cause,
                k0,
                k1,
                queue=q,
                strength=strength,
                shape="step",
                extra={"keep": float(rng.choice([0.0, rng.uniform(0.1, 0.4)]))},
            )
        ]
    if cause == "node_not_ready":
        if not nodes:
            return None
        return [
            Fault(
                fid,
                cause,
                k0,
                k1,
                node=str(rng.choice(np.array(nodes))),
                strength=strength,
                dark=bool(rng.random() < 0.6),
            )
        ]
    running = [j for j in jobs if j.first <= k0 - 2 and j.last >= k1]
    if cause in _NETWORK or (cause in PEER_WAITS and rng.random() < 0.7):
        # Gangs across nodes: the network's victims, and the ones whose peers wait on a broken node.
        running = [j for j in running if len(j.nodes) > 1] or running
    if cause in ("nvlink", "cascade"):
        running = [j for j in running if len(j.gpus) > 1]
    if not running:
        return None
    job = running[int(rng.integers(len(running)))]
    node = str(rng.choice(np.array(job.nodes)))
    on_node = [g for n, g in job.gpus if n == node]
    if cause in ("gpu_thermal", "gpu_power_cap"):
        gpus = tuple(
            str(g)
            for g in rng.choice(np.array(on_node), size=min(len(on_node), int(rng.integers(1, 4))), replace=False)
        )
    elif cause in ("gpu_hardware", "nvlink", "cascade"):
        gpus = (str(rng.choice(np.array(on_node))),)
    else:
        gpus = tuple(on_node)
    if cause == "cascade":
        # One root cause, three phases: link errors, the collective hangs, the gang restarts over and over.
        a, b = k0 + (k1 - k0) // 3, k0 + 2 * (k1 - k0) // 3
        return [
            Fault(
                fid + i,  # one id per phase: each is scored (and located) on its own windows
                "nvlink",
                s0,
                s1,
                node,
                gpus,
                job,
                strength=strength,
                shape="step",
                phase=p,
                xid=74 if p != "nvlink" else 0,
            )
            for i, (p, s0, s1) in enumerate((("nvlink", k0, a), ("hang", a, b), ("restarts", b, k1)))
        ]
    xid = 0
    if cause == "gpu_hardware":
        xid = int(rng.choice(np.array(HANG_XIDS + OTHER_XIDS)))
        shape = "step"
    if cause == "nvlink" and strength > 0.7:
        xid = 74
    return [Fault(fid, cause, k0, k1, node, gpus, job, strength=strength, shape=shape, xid=xid)]


def label_rows(
    feats: pd.DataFrame, faults: list[Fault], times: np.ndarray, at: pd.Timestamp, window: pd.Timedelta
) -> pd.DataFrame:
    """``feats`` of the window ending ``at`` with ``label``, ``role``, ``cover`` and ``fault_id``; rows a fault
    touches too faintly (or only through the preceding window) removed."""
    t1, w = pd.Timestamp(at).value, pd.Timedelta(window).value
    step = int(np.median(np.diff(times))) if len(times) > 1 else 60 * 10**9
    n = len(feats)
    label, role = np.full(n, HEALTHY, dtype=object), np.full(n, "", dtype=object)
    cover, fid = np.zeros(n), np.full(n, -1)
    touched = np.zeros(n, dtype=bool)
    keys = np.where(feats["is_queue"].to_numpy() == 1, feats["queue"].to_numpy(), feats["node"].to_numpy())
    for f in faults:
        # A fault bends samples start..end-1; sample k stands for the step (t[k] - step, t[k]].
        lo, hi = int(times[f.start]) - step, int(times[min(f.end, len(times)) - 1])
        if hi <= t1 - 2 * w or lo >= t1:
            continue
        frac = max(0, min(hi, t1) - max(lo, t1 - w)) / w
        culprit, peer = np.isin(keys, list(f.culprits())), np.isin(keys, list(f.peers()))
        hit = culprit | peer
        touched |= hit
        # The strongest cover wins; a culprit beats a peer at the same cover.
        better = hit & (frac >= MIN_COVER) & ((frac > cover) | ((frac == cover) & culprit & (role == "peer")))
        label[better], cover[better], fid[better] = f.cause, frac, f.fault_id
        role[better] = np.where(culprit[better], "culprit", "peer")
    out = feats.assign(label=label, role=role, cover=cover, fault_id=fid)
    return out[~touched | (cover >= MIN_COVER)].reset_index(drop=True)
