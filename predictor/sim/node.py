"""node_exporter series per node: network counters, TCP retransmits, CPU time by mode, load.

Derived from what the node's GPUs are doing (multi-node jobs move bytes in proportion to how busy their
GPUs are; data loaders cost user CPU and iowait), so a node's host metrics agree with its GPUs unless a
fault says otherwise. A node that is not ready is not scraped: its samples are absent, not zero.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from predictor.sim.dcgm import DcgmGenerator
from predictor.sim.effects import apply_node_effects, extra_cores
from predictor.sim.series import Family, Series

__all__ = ["node_families"]

_SYSTEM = 0.03


def node_families(gen: DcgmGenerator) -> list[Family]:
    o = gen.o
    names = o.cluster.node_names()
    step = o.grid.step_s
    n_nodes = o.cluster.n_nodes
    seed = o.seed

    def rng(name: str) -> np.random.Generator:
        return np.random.default_rng([seed, 0x90DE, sum(name.encode()) * 131 + len(name)])

    def per_node_sum(values: np.ndarray) -> np.ndarray:
        return np.asarray(o.node_view(values).sum(axis=1))

    def job_param(param: np.ndarray) -> np.ndarray:
        job = o.job_of(o.owner)
        return np.where(o.busy, param.astype(np.float32)[job], np.float32(0))

    def rate(name: str) -> np.ndarray:
        r = rng(name)
        shape = (n_nodes, o.grid.n_steps)
        if name == "net_rate":
            level = np.maximum(o.profiles.util_mean, 1).astype(np.float32)
            job = o.job_of(o.owner)
            scaled = job_param(o.profiles.net_gbps_per_gpu) * gen.util / level[job]
            m = per_node_sum(scaled) + r.uniform(1e5, 2e6, shape).astype(np.float32)
        elif name == "drop_rate":
            m = r.exponential(0.02, shape).astype(np.float32)
        elif name == "retrans_rate":
            m = (0.2 + net() * 2e-8 + r.exponential(0.3, shape)).astype(np.float32)
        elif name == "iowait":
            m = np.clip(0.004 + per_node_sum(job_param(o.profiles.iowait_frac)) / 8
                        + r.normal(0, 0.002, shape), 0, 1).astype(np.float32)
        elif name == "user":
            m = np.clip(0.02 + per_node_sum(job_param(o.profiles.cpu_user_frac)) / 8
                        + r.normal(0, 0.01, shape), 0, 1).astype(np.float32)
        elif name == "load":
            m = (cpu_modes()["user"] * extra_cores() * 1.1 + r.normal(0, 1.5, shape)).astype(np.float32)
        else:
            raise KeyError(name)
        apply_node_effects(name, m, o)
        return np.asarray(np.maximum(m, 0))

    rate_cache: dict[str, np.ndarray] = {}

    def net() -> np.ndarray:
        if "net" not in rate_cache:
            rate_cache["net"] = rate("net_rate")
        return rate_cache["net"]

    def cpu_modes() -> dict[str, np.ndarray]:
        if "user" not in rate_cache:
            rate_cache["user"] = rate("user")
            rate_cache["iowait"] = rate("iowait")
            total = rate_cache["user"] + rate_cache["iowait"]
            over = np.maximum(total + _SYSTEM, 1.0)  # iowait and user share one CPU second per second
            rate_cache["user"] /= over
            rate_cache["iowait"] /= over
            rate_cache["idle"] = np.maximum(1 - rate_cache["user"] - rate_cache["iowait"] - _SYSTEM, 0)
        return rate_cache

    def counter(make: Callable[[], np.ndarray], offset_scale: float) -> np.ndarray:
        m = make().astype(np.float64) * step
        offset = rng(f"offset{offset_scale}").uniform(0, offset_scale, (n_nodes, 1))
        return np.cumsum(m, axis=1) + offset

    Variant = tuple[dict[str, str], Callable[[], np.ndarray]]

    def fam(name: str, kind: str, help_: str, variants: list[Variant], decimals: int = 0) -> Family:
        def series() -> Iterator[Series]:
            for labels, make in variants:
                m = make()
                for n in range(n_nodes):
                    steps = np.flatnonzero(o.node_ready[n])
                    yield ({"instance": f"{names[n]}:9100", "job": "node-exporter", "node": names[n], **labels},
                           steps, m[n, steps].astype(np.float64))

        return Family(name, kind, help_, series, decimals)  # type: ignore[arg-type]

    eth = {"device": "eth0"}

    def cpu(mode: str, offset: float) -> Variant:
        return {"cpu": "0", "mode": mode}, lambda: counter(lambda: cpu_modes()[mode], offset)

    return [
        fam("node_network_receive_bytes_total", "counter", "Network device statistic receive_bytes.",
            [(eth, lambda: np.floor(counter(net, 1e12)))]),
        fam("node_network_transmit_bytes_total", "counter", "Network device statistic transmit_bytes.",
            [(eth, lambda: np.floor(counter(lambda: net() * 0.97, 1e12)))]),
        fam("node_network_receive_drop_total", "counter", "Network device statistic receive_drop.",
            [(eth, lambda: np.floor(counter(lambda: rate("drop_rate"), 100)))]),
        fam("node_network_receive_errs_total", "counter", "Network device statistic receive_errs.",
            [(eth, lambda: np.zeros((n_nodes, o.grid.n_steps)))]),
        fam("node_netstat_Tcp_RetransSegs", "unknown", "Statistic TcpRetransSegs.",
            [({}, lambda: np.floor(counter(lambda: rate("retrans_rate"), 1e5)))]),
        fam("node_cpu_seconds_total", "counter", "Seconds the CPUs spent in each mode.",
            [cpu("iowait", 1e4), cpu("user", 1e5), cpu("idle", 1e5)], decimals=2),
        fam("node_load1", "gauge", "1m load average.", [({}, lambda: rate("load"))], decimals=2),
    ]
