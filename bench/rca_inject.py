"""Bend a simulated healthy history (``WindowData`` matrices) the way ``bench.rca_faults`` plans say.

The history comes from the training simulator run with no faults (its jobs, queues, load and exporters are
realistic); the faults are applied here, on the same matrices ``models.rca_features`` reads, with magnitudes
and onsets of their own. Counters stay counters: a fault changes their per-step increments and the series is
summed again, so a rate rises during the fault and the total stays monotone. Each fault draws from its own
seeded stream. ``confound`` adds healthy look-alikes: GPUs that run hot while healthy, checkpoint pauses
(a job's GPUs idle for two or three minutes) and CPU-hungry neighbours that leave the GPUs alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bench.rca_edit import append, blend, cols_of, counter, envelope, scale, set_where_held
from bench.rca_faults import HANG_XIDS, Fault, running_jobs
from models.rca_window import WindowData, col, node_of, quiet

__all__ = ["confound", "inject"]

_GPU = "DCGM_FI_DEV_"
RESTARTS = "kube_pod_container_status_restarts_total"
REASON = "kube_pod_container_status_last_terminated_reason"
_PAUSE = ("node_ethtool_rx_prio3_pause", "node_ethtool_tx_prio3_pause")
_ECN = ("node_ethtool_np_ecn_marked_roce_packets", "node_ethtool_np_cnp_sent", "node_ethtool_rp_cnp_handled")


def _crash(data: WindowData, f: Fault, steps: Sequence[int]) -> None:
    """The job's pods restart at ``steps``: the restart counter steps up and the reason reads ``Error``."""
    if f.job is None or not steps:
        return
    T = len(data.times)
    t = data.tables[RESTARTS]
    for pod in f.job.pods:
        hit = np.flatnonzero((col(t.labels, "pod") == pod) & (col(t.labels, "namespace") == f.job.namespace))
        for c in hit:
            for k in steps:
                t.values[k:, c] += 1
        reason = np.full(T, np.nan)
        reason[steps[0] :] = 1.0
        lab = pd.DataFrame([{"namespace": f.job.namespace, "pod": pod, "container": "main", "reason": "Error"}])
        append(data, REASON, reason[:, None], lab)


def _ensure_restarts(data: WindowData) -> None:
    """Every pod gets a restart counter at zero (kube-state-metrics exports one per container)."""
    if RESTARTS in data.tables or "kube_pod_labels" not in data.tables:
        return
    pods = data.tables["kube_pod_labels"]
    lab = pods.labels[["namespace", "pod"]].assign(container="main").drop_duplicates().reset_index(drop=True)
    values = np.where(np.isfinite(pods.values[:, lab.index.to_numpy()]), 0.0, np.nan)
    append(data, RESTARTS, values, lab)


def inject(data: WindowData, faults: Sequence[Fault], seed: int) -> WindowData:
    """Apply every fault to ``data`` in place (and return it)."""
    _ensure_restarts(data)
    step_s = float(np.median(np.diff(data.times))) / 1e9 if len(data.times) > 1 else 60.0
    for f in faults:
        rng = np.random.default_rng([seed, f.fault_id, len(f.phase), 0x5EED])
        k0, k1 = f.start, min(f.end, len(data.times))
        if k1 <= k0:
            continue
        _apply(data, f, k0, k1, envelope(f.shape, k1 - k0, rng), f.strength, step_s, rng)
    data._gpu_cache.clear()
    return data


def _apply(
    data: WindowData, f: Fault, k0: int, k1: int, e: np.ndarray, s: float, step_s: float, rng: np.random.Generator
) -> None:
    n, tables = k1 - k0, data.tables
    node = [f.node]
    job_nodes = list(f.job_nodes) or node
    gpu_t = tables.get(f"{_GPU}GPU_UTIL")
    mine = cols_of(gpu_t, node, f.gpus) if gpu_t is not None else np.zeros(0, dtype=np.intp)
    whole = np.zeros(0, dtype=np.intp)
    if gpu_t is not None and f.job is not None:
        keys = set(f.job.gpus)
        pairs = zip(node_of(gpu_t.labels), col(gpu_t.labels, "gpu"), strict=True)
        whole = np.array([i for i, k in enumerate(pairs) if k in keys], dtype=np.intp)
    util = f"{_GPU}GPU_UTIL"
    if f.cause == "gpu_thermal":
        # Towards a throttling temperature (84-92 °C: the training simulator's are 86-95 °C), from wherever it was.
        hot = 84 + 8 * s + rng.normal(0, 1.0, (n, len(mine)))
        blend(
            data, f"{_GPU}GPU_TEMP", mine, k0, k1, np.maximum(hot, tables[f"{_GPU}GPU_TEMP"].values[k0:k1][:, mine]), e
        )
        scale(data, f"{_GPU}SM_CLOCK", mine, k0, k1, 0.92 - 0.12 * s, e)
        scale(data, util, mine, k0, k1, 0.95 - 0.15 * s, e)
        scale(data, f"{_GPU}POWER_USAGE", mine, k0, k1, 0.9, e)
        set_where_held(
            data,
            f"{_GPU}CLOCK_THROTTLE_REASONS",
            mine,
            k0,
            k1,
            np.where(e[:, None] > 0.5, 32 | (8 if s > 0.6 else 0), 0),
        )
    elif f.cause == "gpu_power_cap":
        power = tables[f"{_GPU}POWER_USAGE"].values
        base = quiet(np.nanmedian, power[max(0, k0 - 15) : k0][:, mine], axis=0) if len(mine) else 0.0
        blend(
            data,
            f"{_GPU}POWER_USAGE",
            mine,
            k0,
            k1,
            np.nan_to_num(base) * (0.6 - 0.15 * s) + rng.normal(0, 2, (n, len(mine))),
            e,
        )
        scale(data, f"{_GPU}SM_CLOCK", mine, k0, k1, 0.95 - 0.2 * s, e)
        scale(data, util, mine, k0, k1, 0.97 - 0.15 * s, e)
        set_where_held(data, f"{_GPU}CLOCK_THROTTLE_REASONS", mine, k0, k1, np.where(e[:, None] > 0.5, 4, 0))
    elif f.cause == "gpu_hardware":
        shown = max(2, int(n * rng.uniform(0.3, 1.0)))  # the XID gauge is reported for part of the fault only
        set_where_held(data, f"{_GPU}XID_ERRORS", mine, k0, k0 + min(shown, n), float(f.xid))
        if f.xid in HANG_XIDS:
            set_where_held(data, util, whole, k0, k1, rng.uniform(0, 4, (n, len(whole))))
            scale(data, f"{_GPU}POWER_USAGE", whole, k0, k1, 0.45, e)
        if f.xid in (48, 94):
            counter(data, f"{_GPU}ECC_DBE_VOL_TOTAL", mine, k0, k0 + 1, np.ones(1), add=1.0)
        if f.xid in (48, 79) and "kube_node_status_allocatable" in tables:
            blend(
                data,
                "kube_node_status_allocatable",
                cols_of(tables["kube_node_status_allocatable"], node),
                k0,
                k1,
                tables["kube_node_status_allocatable"].values[k0:k1][
                    :, cols_of(tables["kube_node_status_allocatable"], node)
                ]
                - 1,
                e,
            )
    elif f.cause == "nvlink":
        _nvlink(data, f, k0, k1, e, s, step_s, rng, mine, whole)
    elif f.cause == "gpu_oom":
        _oom(data, f, k0, k1, rng, whole)
    elif f.cause in ("network_congestion", "roce_pfc_storm", "roce_congestion"):
        hosts = tables.get("node_network_receive_bytes_total")
        cols = {name: cols_of(tables[name], job_nodes) for name in tables if name.startswith("node_")}
        if f.cause == "network_congestion":
            counter(
                data,
                "node_netstat_Tcp_RetransSegs",
                cols.get("node_netstat_Tcp_RetransSegs", whole[:0]),
                k0,
                k1,
                e,
                mult=3 + 15 * s,
                add=rng.uniform(50, 500) * step_s,
            )
            counter(
                data,
                "node_network_receive_drop_total",
                cols.get("node_network_receive_drop_total", whole[:0]),
                k0,
                k1,
                e,
                add=rng.uniform(5, 100) * s * step_s,
            )
            if hosts is not None:
                counter(
                    data,
                    "node_network_receive_bytes_total",
                    cols["node_network_receive_bytes_total"],
                    k0,
                    k1,
                    e,
                    mult=0.75,
                )
        for name in _PAUSE if f.cause == "roce_pfc_storm" else _ECN if f.cause == "roce_congestion" else ():
            # A PFC storm starts at one NIC and spreads to the job's others, weaker.
            here = cols_of(tables[name], node) if name in tables else whole[:0]
            storm = f.cause == "roce_pfc_storm"
            add = rng.uniform(500, 2e4) * s * step_s
            counter(data, name, here, k0, k1, e, mult=(20 + 400 * s) if storm else (5 + 200 * s), add=add)
            rest = np.setdiff1d(cols.get(name, whole[:0]), here)
            counter(data, name, rest, k0, k1, e, mult=(5 + 50 * s) if storm else (5 + 200 * s), add=add / 4)
        scale(
            data,
            util,
            whole,
            k0,
            k1,
            {"network_congestion": 0.8, "roce_pfc_storm": 0.75, "roce_congestion": 0.85}[f.cause] - 0.2 * s,
            e,
        )
    elif f.cause == "io_stall":
        cpu = tables.get("node_cpu_seconds_total")
        if cpu is not None:
            counter(
                data,
                "node_cpu_seconds_total",
                cols_of(cpu, job_nodes, where={"mode": "iowait"}),
                k0,
                k1,
                e,
                add=(0.15 + 0.3 * s) * step_s,
            )
        period = int(rng.integers(4, 10))
        square = np.where((np.arange(n) % period) < period // 2, 0.05, 1.0)  # stalled half of each period
        scale(data, util, whole, k0, k1, square[:, None] * np.ones((1, len(whole))), e)
    elif f.cause == "cpu_contention":
        cpu = tables.get("node_cpu_seconds_total")
        if cpu is not None:
            counter(
                data,
                "node_cpu_seconds_total",
                cols_of(cpu, job_nodes, where={"mode": "user"}),
                k0,
                k1,
                e,
                floor=(0.82 + 0.12 * s) * step_s,
            )
        if "node_load1" in tables:
            scale(data, "node_load1", cols_of(tables["node_load1"], job_nodes), k0, k1, 1.6 + s, e)
        scale(data, util, whole, k0, k1, rng.uniform(0.55, 1.05, (n, len(whole))), e)
    elif f.cause == "nic_link_flap":
        carrier = tables.get("node_network_carrier_changes_total")
        if carrier is not None:
            flaps = np.zeros(n)
            # Down and up again at irregular 3-10 minute gaps (the training simulator's flap every two minutes).
            gaps = np.cumsum(rng.integers(3, 11, size=n) * 60 / step_s).astype(int) - int(rng.integers(0, 3))
            flaps[gaps[(gaps >= 0) & (gaps < n)]] = 2.0
            counter(
                data,
                "node_network_carrier_changes_total",
                cols_of(carrier, node),
                k0,
                k1,
                np.ones(n),
                add=flaps[:, None],
            )
        if "node_network_receive_drop_total" in tables:
            counter(
                data,
                "node_network_receive_drop_total",
                cols_of(tables["node_network_receive_drop_total"], node),
                k0,
                k1,
                e,
                add=rng.uniform(20, 200) * s * step_s,
            )
        if "node_network_receive_bytes_total" in tables:
            counter(
                data,
                "node_network_receive_bytes_total",
                cols_of(tables["node_network_receive_bytes_total"], node),
                k0,
                k1,
                e,
                mult=0.6,
            )
        scale(data, util, whole, k0, k1, 0.5 - 0.3 * s, e)
    elif f.cause == "scheduling_starvation":
        _starve(data, f, k0, k1, rng)
    elif f.cause == "node_not_ready":
        cond = tables.get("kube_node_status_condition")
        if cond is not None:
            cond.values[k0:k1, cols_of(cond, node, where={"condition": "Ready", "status": "true"})] = 0.0
            cond.values[k0:k1, cols_of(cond, node, where={"condition": "Ready", "status": "unknown"})] = 1.0
        if f.dark:
            for name, t in tables.items():
                if name.startswith((_GPU, "node_")):
                    t.values[k0:k1, cols_of(t, node)] = np.nan


def _nvlink(
    data: WindowData,
    f: Fault,
    k0: int,
    k1: int,
    e: np.ndarray,
    s: float,
    step_s: float,
    rng: np.random.Generator,
    mine: np.ndarray,
    whole: np.ndarray,
) -> None:
    n, util = k1 - k0, f"{_GPU}GPU_UTIL"
    if f.phase in ("", "nvlink", "hang"):
        counter(
            data,
            f"{_GPU}NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
            mine,
            k0,
            k1,
            e,
            add=rng.uniform(2, 40, (n, len(mine))) * s * step_s,
        )
        counter(
            data,
            f"{_GPU}NVLINK_REPLAY_ERROR_COUNT_TOTAL",
            mine,
            k0,
            k1,
            e,
            add=rng.uniform(1, 20, (n, len(mine))) * s * step_s,
        )
        counter(data, f"{_GPU}NVLINK_RECOVERY_ERROR_COUNT_TOTAL", mine, k0, k1, e, add=0.02 * s * step_s)
    if f.phase in ("", "nvlink"):
        counter(data, f"{_GPU}NVLINK_BANDWIDTH_TOTAL", whole, k0, k1, e, mult=0.5 + 0.3 * (1 - s))
        scale(data, util, whole, k0, k1, 0.85 - 0.2 * s, e)
        if f.xid:
            set_where_held(data, f"{_GPU}XID_ERRORS", mine, k0, k0 + max(2, n // 3), float(f.xid))
    elif f.phase == "hang":
        set_where_held(data, f"{_GPU}XID_ERRORS", mine, k0, k1, 74.0)
        counter(data, f"{_GPU}NVLINK_BANDWIDTH_TOTAL", whole, k0, k1, e, mult=0.05)
        set_where_held(data, util, whole, k0, k1, rng.uniform(0, 3, (n, len(whole))))
        scale(data, f"{_GPU}POWER_USAGE", whole, k0, k1, 0.5, e)
    else:  # restart storm: the gang crashes every few minutes and spends most of the time restarting
        every = int(rng.integers(3, 6))
        steps = list(range(k0, k1, every))
        _crash(data, f, steps)
        up = np.where((np.arange(n) % every) == every - 1, 1.0, 0.0)
        scale(data, util, whole, k0, k1, up[:, None] * np.ones((1, len(whole))), np.ones(n))
        counter(data, f"{_GPU}NVLINK_BANDWIDTH_TOTAL", whole, k0, k1, np.ones(n), mult=0.1)


def _oom(data: WindowData, f: Fault, k0: int, k1: int, rng: np.random.Generator, whole: np.ndarray) -> None:
    """GPU memory climbs to 96-99.5 % of the card (ranks staggered), the job crashes and restarts; once or twice."""
    used, free = data.tables.get(f"{_GPU}FB_USED"), data.tables.get(f"{_GPU}FB_FREE")
    if used is None or free is None or not len(whole):
        return
    n = k1 - k0
    total = used.values[k0:k1][:, whole] + free.values[k0:k1][:, whole]
    cycles = 1 if n < 12 else int(rng.integers(1, 3))
    length = n // cycles
    ramp, down = np.zeros(n), np.zeros(n, dtype=bool)
    crashes = []
    for c in range(cycles):
        lo, hi = c * length, n if c == cycles - 1 else (c + 1) * length
        rest = max(1, int(rng.integers(1, 4)))
        grow = max(1, hi - lo - rest)
        ramp[lo : lo + grow] = np.linspace(0.0, 1.0, grow) ** rng.uniform(0.5, 2.0)
        down[lo + grow : hi] = True
        crashes.append(k0 + lo + grow)
    top = rng.uniform(0.96, 0.995)
    base = used.values[k0:k1][:, whole]
    grown = base + (top * total - base) * ramp[:, None]
    new = np.where(down[:, None], 0.02 * total, grown)
    used.values[k0:k1, whole] = np.where(np.isfinite(base), new, np.nan)
    free.values[k0:k1, whole] = np.where(np.isfinite(base), total - new, np.nan)
    scale(data, f"{_GPU}GPU_UTIL", whole, k0, k1, 0.0, down.astype(np.float64))
    _crash(data, f, [k for k in crashes if k < k1])


def _starve(data: WindowData, f: Fault, k0: int, k1: int, rng: np.random.Generator) -> None:
    """The queue's capability is cut (to zero, or to a fraction of its use); its work piles up pending."""
    n = k1 - k0
    cap = data.tables.get("volcano_queue_capacity_scalar_resources")
    alloc = data.tables.get("volcano_queue_allocated_scalar_resources")
    keep = f.extra.get("keep", 0.0)
    if cap is not None:
        c = np.flatnonzero(col(cap.labels, "queue_name") == f.queue)
        used = (
            alloc.values[k0:k1][:, np.flatnonzero(col(alloc.labels, "queue_name") == f.queue)]
            if alloc is not None
            else 0
        )
        cap.values[k0:k1, c] = np.round(keep * np.nanmax(np.atleast_2d(used), initial=0)) if keep else 0.0
    if alloc is not None:
        a = np.flatnonzero(col(alloc.labels, "queue_name") == f.queue)
        alloc.values[k0:k1, a] *= np.linspace(1.0, max(keep, 0.3), n)[:, None]
    pend = data.tables.get("volcano_queue_pod_group_pending_count")
    if pend is not None:
        p = np.flatnonzero(col(pend.labels, "queue_name") == f.queue)
        pend.values[k0:k1, p] += np.round(np.linspace(1, rng.uniform(3, 10), n))[:, None]


def confound(data: WindowData, seed: int) -> WindowData:
    """Healthy look-alikes, in place: hot-but-healthy GPUs, checkpoint pauses, CPU-hungry neighbours."""
    rng = np.random.default_rng([seed, 0xC0F])
    T = len(data.times)
    temp = data.tables.get(f"{_GPU}GPU_TEMP")
    if temp is not None:
        keys = sorted(set(zip(node_of(temp.labels), col(temp.labels, "gpu"), strict=True)))
        hot = {keys[i] for i in rng.choice(len(keys), max(1, len(keys) // 16), replace=False)}
        for j, key in enumerate(zip(node_of(temp.labels), col(temp.labels, "gpu"), strict=True)):
            if key in hot:
                temp.values[:, j] += 6 + 8 * rng.random()
    util = data.tables.get(f"{_GPU}GPU_UTIL")
    for job in running_jobs(data):
        if util is None or rng.random() > 0.3:
            continue
        cols = np.array(
            [
                i
                for i, key in enumerate(zip(node_of(util.labels), col(util.labels, "gpu"), strict=True))
                if key in set(job.gpus)
            ]
        )
        k = job.first + int(rng.integers(20, 60))
        while k < job.last - 3 and len(cols):
            length = int(rng.integers(2, 4))
            util.values[k : k + length, cols] = np.where(
                np.isfinite(util.values[k : k + length, cols]), rng.uniform(0, 5), np.nan
            )
            k += int(rng.integers(30, 60))
    load = data.tables.get("node_load1")
    if load is not None:
        nodes = sorted(set(node_of(load.labels)))
        for node in rng.choice(np.array(nodes), max(1, len(nodes) // 7), replace=False):
            k0 = int(rng.integers(0, max(1, T - 60)))
            k1 = min(T, k0 + int(rng.integers(30, 60)))
            scale(data, "node_load1", cols_of(load, [str(node)]), k0, k1, 1.3 + 0.5 * rng.random(), np.ones(k1 - k0))
    data._gpu_cache.clear()
    return data
