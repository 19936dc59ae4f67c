"""How each injected fault bends the metrics (see ``faults`` for the causes and their story).

Effects are applied family by family to freshly generated matrices, so only one large matrix lives at a
time; every random number comes from the fault's own seeded stream, so the same fault looks the same in
every family it touches. Each effect is written at full strength; a fault with a ramp, bursts or a partial
amplitude (``SimSettings.fault_onsets``) is then pulled back towards the healthy values by ``onsets.shaped``.
"""

from __future__ import annotations

import numpy as np

from predictor.sim.faults import FaultPlan
from predictor.sim.occupancy import Occupancy
from predictor.sim.onsets import shaped

__all__ = ["apply_gpu_effects", "apply_node_effects", "io_pattern", "oom_phases"]

THROTTLE_IDLE, THROTTLE_SW_POWER, THROTTLE_HW_SLOWDOWN, THROTTLE_SW_THERMAL, THROTTLE_HW_THERMAL = 1, 4, 8, 32, 64
_HANG_XIDS = (48, 64, 79, 94)


def io_pattern(length: int, step_s: int) -> np.ndarray:
    """A utilisation sawtooth: the loader fills a buffer, the GPU drains it, then waits on I/O again."""
    period = max(3, min(6, 1800 // step_s))
    phase = np.arange(length) % period
    return (0.03 + 0.97 * phase / (period - 1)).astype(np.float32)


def oom_phases(k0: int, k1: int, step_s: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Memory ramp fraction per step, a restarting mask, and the crash steps of an OOM crash loop."""
    length = k1 - k0
    restart = max(1, round(180 / step_s))  # ~3 min to restart the container
    cycles = max(1, min(3, length // (restart + 3)))
    cycle = length // cycles
    ramp = np.zeros(length, dtype=np.float32)
    restarting = np.zeros(length, dtype=bool)
    crashes = []
    for c in range(cycles):
        lo = c * cycle
        hi = length if c == cycles - 1 else lo + cycle
        grow = max(1, hi - lo - restart)
        ramp[lo : lo + grow] = np.linspace(0.0, 1.0, grow)
        restarting[lo + grow : hi] = True
        crashes.append(k0 + lo + grow)
    return ramp, restarting, crashes


def _rng(o: Occupancy, f: FaultPlan, name: str) -> np.random.Generator:
    return np.random.default_rng([o.seed, f.fault_id, sum(name.encode())])


def apply_gpu_effects(name: str, m: np.ndarray, o: Occupancy, extra: dict[str, np.ndarray]) -> None:
    """Modify the ``[gpu, step]`` matrix of family ``name`` in place for every fault."""
    for f in o.faults:
        if f.gpu < 0:
            continue
        k0, k1 = f.steps(o.grid)
        if k1 <= k0:
            continue
        rows = np.union1d([f.gpu], f.job_gpus)
        with shaped(name, m, rows, k0, k1, f, o.seed):
            _gpu_effect(name, m, o, f, extra, k0, k1)


def _gpu_effect(
    name: str, m: np.ndarray, o: Occupancy, f: FaultPlan, extra: dict[str, np.ndarray], k0: int, k1: int
) -> None:
    """One fault's effect on family ``name``, in full (``onsets.shaped`` shapes it afterwards)."""
    grid = o.grid
    g, jg, s, n = f.gpu, f.job_gpus, f.strength, k1 - k0
    rng = _rng(o, f, name)
    live = o.owner[jg, k0:k1] >= 0  # the job may end or be killed inside the window
    if name == "util":
        factor = {
            "gpu_thermal": 0.8 - 0.3 * s,
            "gpu_power_cap": 0.9 - 0.15 * s,
            "nvlink": 0.75 - 0.3 * s,
            "network_congestion": 0.7 - 0.35 * s,
            "cpu_contention": 0.8 - 0.25 * s,
            "roce_pfc_storm": 0.65 - 0.35 * s,
            "roce_congestion": 0.75 - 0.3 * s,
            "nic_link_flap": 0.6 - 0.3 * s,
        }.get(f.cause)
        rows = np.array([g]) if f.cause in ("gpu_thermal", "gpu_power_cap") else jg
        if factor is not None:
            mult = np.full((len(rows), n), factor, dtype=np.float32)
            if f.cause == "cpu_contention":
                mult *= rng.uniform(0.6, 1.3, size=mult.shape).astype(np.float32)
            m[rows, k0:k1] *= mult
        elif f.cause == "io_stall":
            m[jg, k0:k1] *= io_pattern(n, grid.step_s)[None, :]
        elif f.cause == "gpu_hardware" and f.xid in _HANG_XIDS:
            m[jg, k0:k1] = rng.uniform(0, 2, size=(len(jg), n)).astype(np.float32)
        elif f.cause == "gpu_oom":
            _, restarting, _ = oom_phases(k0, k1, grid.step_s)
            m[jg, k0:k1] *= np.where(restarting, 0.0, 1.0).astype(np.float32)[None, :]
        m[jg, k0:k1] = np.where(live, np.clip(m[jg, k0:k1], 0, 100), 0)
    elif name == "temp" and f.cause == "gpu_thermal":
        m[g, k0:k1] = 86 + 9 * s + rng.normal(0, 1.0, n)
    elif name == "clock" and f.cause in ("gpu_thermal", "gpu_power_cap"):
        drop = (0.75 - 0.25 * s) if f.cause == "gpu_thermal" else (0.85 - 0.2 * s)
        m[g, k0:k1] *= drop
    elif name == "power" and f.cause == "gpu_power_cap":
        limit = extra["power_limit"][g]
        m[g, k0:k1] = limit * (0.75 - 0.25 * s) + rng.normal(0, 1.5, n)
    elif name == "throttle" and f.cause == "gpu_thermal":
        m[g, k0:k1] = THROTTLE_SW_THERMAL | (THROTTLE_HW_THERMAL | THROTTLE_HW_SLOWDOWN if s > 0.6 else 0)
    elif name == "throttle" and f.cause == "gpu_power_cap":
        m[g, k0:k1] = THROTTLE_SW_POWER
    elif name == "xid" and f.cause in ("gpu_hardware", "nvlink") and f.xid:
        m[g, k0:k1] = f.xid
    elif name in ("nvlink_replay_rate", "nvlink_recovery_rate") and f.cause == "nvlink":
        m[g, k0:k1] = rng.uniform(1, 20, n) * s * (1.0 if name == "nvlink_replay_rate" else 0.05)
    elif name == "ecc_dbe_rate" and f.cause == "gpu_hardware" and f.xid in (48, 94):
        m[g, k0] += 1.0 / grid.step_s
    elif name == "nvlink_rate" and f.cause == "nvlink":
        m[jg, k0:k1] *= 0.2 + 0.3 * (1 - s)
    elif name == "crc_rate" and f.cause == "nvlink":
        m[g, k0:k1] = rng.uniform(5, 50, n) * s
    elif name == "fb_used" and f.cause == "gpu_oom":
        ramp, restarting, _ = oom_phases(k0, k1, grid.step_s)
        total = extra["memory_mib"][jg][:, None]
        base = m[jg, k0:k1]
        grown = base + (total - 300 - base) * ramp[None, :]
        m[jg, k0:k1] = np.where(restarting[None, :], 0.0, np.where(live, grown, base))


def apply_node_effects(name: str, m: np.ndarray, o: Occupancy) -> None:
    """Modify a ``[node, step]`` matrix (per-second rates or gauges) in place for every fault."""
    for f in o.faults:
        if len(f.job_nodes) == 0:
            continue
        k0, k1 = f.steps(o.grid)
        if k1 <= k0:
            continue
        rows = np.union1d(f.job_nodes, [f.node] if f.node >= 0 else [])
        with shaped(name, m, rows, k0, k1, f, o.seed):
            _node_effect(name, m, o, f, k0, k1)


def _node_effect(name: str, m: np.ndarray, o: Occupancy, f: FaultPlan, k0: int, k1: int) -> None:
    """One fault's effect on the node family ``name``, in full."""
    nodes, s, n = f.job_nodes, f.strength, k1 - k0
    rng = _rng(o, f, name)
    shape = (len(nodes), n)
    if f.cause == "network_congestion":
        if name == "retrans_rate":
            # Retransmits scale with the traffic already flowing: many times the usual rate.
            m[nodes, k0:k1] = m[nodes, k0:k1] * (8 + 20 * s) + rng.uniform(100, 500, shape)
        elif name == "drop_rate":
            m[nodes, k0:k1] += rng.uniform(20, 300, shape) * s
        elif name == "net_rate":
            m[nodes, k0:k1] *= 0.6 - 0.3 * s
    elif f.cause == "roce_pfc_storm" and name == "pfc_pause_rate":
        m[nodes, k0:k1] = m[nodes, k0:k1] * (50 + 200 * s) + rng.uniform(2e3, 2e4, shape) * s
    elif f.cause == "roce_congestion" and name == "ecn_rate":
        m[nodes, k0:k1] = m[nodes, k0:k1] * (20 + 80 * s) + rng.uniform(1e3, 1e4, shape) * s
    elif f.cause == "nic_link_flap" and f.node >= 0:
        if name == "carrier_rate":
            flaps = np.zeros(n, dtype=np.float32)
            # Down and up again about every two minutes, from the second step on.
            flaps[1 :: max(1, round(120 / o.grid.step_s))] = 2.0 / o.grid.step_s
            m[f.node, k0:k1] += flaps
        elif name == "drop_rate":
            m[f.node, k0:k1] += rng.uniform(50, 400, n) * s
    elif f.cause == "io_stall" and name == "iowait":
        m[nodes, k0:k1] = np.maximum(m[nodes, k0:k1], 0.3 + 0.4 * s + rng.normal(0, 0.03, shape))
    elif f.cause == "io_stall" and name == "disk_read_rate":
        m[nodes, k0:k1] *= 0.3
    elif f.cause == "cpu_contention" and name == "user":
        m[nodes, k0:k1] = np.clip(0.9 + 0.08 * s + rng.normal(0, 0.01, shape), 0, 0.99)
    elif f.cause == "cpu_contention" and name == "load":
        m[nodes, k0:k1] = (1.5 + s) * extra_cores() + rng.normal(0, 4, shape)


def extra_cores() -> int:
    """Logical CPUs of a simulated node (a typical 8-GPU server)."""
    return 96
