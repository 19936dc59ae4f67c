"""node_exporter series per node: network counters, TCP retransmits, CPU time by mode, load, and the RDMA
NIC's ethtool counters (PFC pause frames, ECN marks and CNPs) and the link's carrier changes.

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
_Variant = tuple[dict[str, str], Callable[[], np.ndarray]]  # extra labels, and how to make [nodes, steps] values


class _NodeMetrics:
    """The per-node rates behind the node_exporter families; each is [nodes, steps] and made only when read."""

    def __init__(self, gen: DcgmGenerator) -> None:
        self.gen = gen
        self.o = gen.o
        self.names = self.o.cluster.node_names()
        self.shape = (self.o.cluster.n_nodes, self.o.grid.n_steps)
        self._cache: dict[str, np.ndarray] = {}

    def rng(self, name: str) -> np.random.Generator:
        """One stream per quantity, so adding or reordering families never changes another's values."""
        return np.random.default_rng([self.o.seed, 0x90DE, sum(name.encode()) * 131 + len(name)])

    def _per_node_sum(self, values: np.ndarray) -> np.ndarray:
        return np.asarray(self.o.node_view(values).sum(axis=1))

    def _job_param(self, param: np.ndarray) -> np.ndarray:
        job = self.o.job_of(self.o.owner)
        return np.where(self.o.busy, param.astype(np.float32)[job], np.float32(0))

    def rate(self, name: str) -> np.ndarray:
        """A per-second rate with the faults' node effects applied, never negative."""
        m = self._base_rate(name)
        apply_node_effects(name, m, self.o)
        return np.asarray(np.maximum(m, 0))

    def _base_rate(self, name: str) -> np.ndarray:
        o, r, shape = self.o, self.rng(name), self.shape
        if name == "net_rate":
            level = np.maximum(o.profiles.util_mean, 1).astype(np.float32)
            job = o.job_of(o.owner)
            scaled = self._job_param(o.profiles.net_gbps_per_gpu) * self.gen.util / level[job]
            return self._per_node_sum(scaled) + r.uniform(1e5, 2e6, shape).astype(np.float32)
        if name == "drop_rate":
            return r.exponential(0.02, shape).astype(np.float32)
        if name == "retrans_rate":
            return (0.2 + self.net() * 2e-8 + r.exponential(0.3, shape)).astype(np.float32)
        if name == "pfc_pause_rate":  # lossless RoCE pauses a little all the time
            return (self.net() * 2e-9 + r.exponential(2.0, shape)).astype(np.float32)
        if name == "ecn_rate":
            return (self.net() * 1e-9 + r.exponential(1.0, shape)).astype(np.float32)
        if name == "carrier_rate":
            return np.zeros(shape, dtype=np.float32)
        if name == "iowait":
            return np.clip(
                0.004 + self._per_node_sum(self._job_param(o.profiles.iowait_frac)) / 8 + r.normal(0, 0.002, shape),
                0,
                1,
            ).astype(np.float32)
        if name == "user":
            return np.clip(
                0.02 + self._per_node_sum(self._job_param(o.profiles.cpu_user_frac)) / 8 + r.normal(0, 0.01, shape),
                0,
                1,
            ).astype(np.float32)
        if name == "load":
            return (self.cpu_modes()["user"] * extra_cores() * 1.1 + r.normal(0, 1.5, shape)).astype(np.float32)
        raise KeyError(name)

    def net(self) -> np.ndarray:
        """Received bytes per second (read by two families and the retransmits: made once)."""
        if "net" not in self._cache:
            self._cache["net"] = self.rate("net_rate")
        return self._cache["net"]

    def cpu_modes(self) -> dict[str, np.ndarray]:
        """CPU seconds per second in user, iowait and idle (made once)."""
        cache = self._cache
        if "user" not in cache:
            cache["user"] = self.rate("user")
            cache["iowait"] = self.rate("iowait")
            total = cache["user"] + cache["iowait"]
            over = np.maximum(total + _SYSTEM, 1.0)  # iowait and user share one CPU second per second
            cache["user"] /= over
            cache["iowait"] /= over
            cache["idle"] = np.maximum(1 - cache["user"] - cache["iowait"] - _SYSTEM, 0)
        return cache

    def counter(self, make: Callable[[], np.ndarray], offset_scale: float) -> np.ndarray:
        """A rate integrated into a counter that starts at a random offset (exporters are not new)."""
        m = make().astype(np.float64) * self.o.grid.step_s
        offset = self.rng(f"offset{offset_scale}").uniform(0, offset_scale, (self.shape[0], 1))
        return np.cumsum(m, axis=1) + offset

    def family(self, name: str, kind: str, help_: str, variants: list[_Variant], decimals: int = 0) -> Family:
        """A family whose series are made lazily, one per node and variant, over the node's ready steps."""
        o, names = self.o, self.names

        def series() -> Iterator[Series]:
            for labels, make in variants:
                m = make()
                for n in range(self.shape[0]):
                    steps = np.flatnonzero(o.node_ready[n])
                    yield (
                        {"instance": f"{names[n]}:9100", "job": "node-exporter", "node": names[n], **labels},
                        steps,
                        m[n, steps].astype(np.float64),
                    )

        return Family(name, kind, help_, series, decimals)  # type: ignore[arg-type]


def node_families(gen: DcgmGenerator) -> list[Family]:
    """node_exporter's families for every node, in exposition order; values are made when a family is read."""
    nm = _NodeMetrics(gen)
    fam, net, counter = nm.family, nm.net, nm.counter
    eth = {"device": "eth0"}
    rdma = {"device": "mlx5_0"}

    def nic(rate: str, share: float, offset: float) -> _Variant:
        """A counter of the RDMA NIC (mlx5, ethtool collector): a share of one per-node rate."""
        return rdma, lambda: np.floor(counter(lambda: nm.rate(rate) * share, offset))

    def cpu(mode: str, offset: float) -> _Variant:
        return {"cpu": "0", "mode": mode}, lambda: counter(lambda: nm.cpu_modes()[mode], offset)

    return [
        fam(
            "node_network_receive_bytes_total",
            "counter",
            "Network device statistic receive_bytes.",
            [(eth, lambda: np.floor(counter(net, 1e12)))],
        ),
        fam(
            "node_network_transmit_bytes_total",
            "counter",
            "Network device statistic transmit_bytes.",
            [(eth, lambda: np.floor(counter(lambda: net() * 0.97, 1e12)))],
        ),
        fam(
            "node_network_receive_drop_total",
            "counter",
            "Network device statistic receive_drop.",
            [(eth, lambda: np.floor(counter(lambda: nm.rate("drop_rate"), 100)))],
        ),
        fam(
            "node_network_receive_errs_total",
            "counter",
            "Network device statistic receive_errs.",
            [(eth, lambda: np.zeros(nm.shape))],
        ),
        fam(
            "node_netstat_Tcp_RetransSegs",
            "unknown",
            "Statistic TcpRetransSegs.",
            [({}, lambda: np.floor(counter(lambda: nm.rate("retrans_rate"), 1e5)))],
        ),
        fam(
            "node_network_carrier_changes_total",
            "counter",
            "Network device property: carrier_changes_total.",
            [(eth, lambda: np.rint(counter(lambda: nm.rate("carrier_rate"), 0) + 2))],
        ),
        *[
            fam(
                f"node_ethtool_{d}_prio3_pause",
                "unknown",
                f"Network interface {d}_prio3_pause.",
                [nic("pfc_pause_rate", 0.5, 1e7)],
            )
            for d in ("rx", "tx")
        ],
        *[
            fam(f"node_ethtool_{stat}", "unknown", f"Network interface {stat}.", [nic("ecn_rate", share, 1e6)])
            for stat, share in (("np_ecn_marked_roce_packets", 1.0), ("np_cnp_sent", 0.6), ("rp_cnp_handled", 0.6))
        ],
        fam(
            "node_cpu_seconds_total",
            "counter",
            "Seconds the CPUs spent in each mode.",
            [cpu("iowait", 1e4), cpu("user", 1e5), cpu("idle", 1e5)],
            decimals=2,
        ),
        fam("node_load1", "gauge", "1m load average.", [({}, lambda: nm.rate("load"))], decimals=2),
    ]
