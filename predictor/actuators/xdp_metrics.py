"""The node agent's ``/metrics``: XDP per-target traffic read from the pinned maps at scrape time.

A custom collector (not counters incremented by the agent) because the kernel owns the counts: each
scrape sums the per-CPU ``lb_stats`` slots, so the numbers survive agent restarts and never drift from
what ``predictor xdp status`` shows. Names are the contract in ``k8s/METRICS.md``. Beside them, the
agent's own state: whether its last cycle held the datapath as it is, and why.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from predictor.actuators.xdp import XdpActuator
from predictor.actuators.xdp_agent import HOLD_REASONS, AgentState
from predictor.errors import PredictorError

__all__ = ["XdpStatsCollector"]


class XdpStatsCollector(Collector):
    """Exports ``predictor_xdp_target_packets_total``, ``…_passed_packets_total`` and the active profile."""

    def __init__(self, actuator: XdpActuator, node: str, state: AgentState | None = None) -> None:
        self.actuator = actuator
        self.node = node
        self.state = state

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        if self.state is not None:
            yield self._holding(self.state)
        yield from self._datapath()

    def _holding(self, state: AgentState) -> GaugeMetricFamily:
        # One series per reason (1 for the current one), so an alert or a panel needs no absent() tricks.
        holding = GaugeMetricFamily(
            "predictor_xdp_agent_holding",
            "1 for the reason the agent's last cycle held the datapath as it is.",
            labels=["node", "reason"],
        )
        for reason in HOLD_REASONS:
            holding.add_metric([self.node, reason], 1.0 if state.hold == reason else 0.0)
        return holding

    def _datapath(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        up = GaugeMetricFamily("predictor_xdp_up", "1 when the pinned load balancer could be read.", labels=["node"])
        try:
            status = self.actuator.status()
        except PredictorError:
            # Not loaded (yet) or unreadable: say so instead of failing the scrape.
            up.add_metric([self.node], 0.0)
            yield up
            return
        up.add_metric([self.node], 1.0)
        yield up
        iface = status.iface or ""
        profile = status.active_profile or ""
        targets = CounterMetricFamily(
            "predictor_xdp_target_packets",
            "Packets redirected to each target (all CPUs).",
            labels=["node", "iface", "target", "profile"],
        )
        for target, packets in sorted(status.stats.items()):
            targets.add_metric([self.node, iface, target, profile], float(packets))
        yield targets
        passed = CounterMetricFamily(
            "predictor_xdp_passed_packets",
            "Packets passed to the stack (not steered, unparsed or observed).",
            labels=["node", "iface"],
        )
        passed.add_metric([self.node, iface], float(status.passed + status.unparsed))
        yield passed
        info = GaugeMetricFamily(
            "predictor_xdp_active_profile_info", "The active profile (value 1).", labels=["node", "iface", "profile"]
        )
        if profile:
            info.add_metric([self.node, iface, profile], 1.0)
        yield info
