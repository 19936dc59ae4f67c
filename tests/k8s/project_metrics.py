"""Synthetic history of the project's own metrics (k8s/METRICS.md), aligned with a simulator run.

The simulator emits what the cluster exports (DCGM, Volcano, kube-state-metrics, node_exporter); the
loop and the node agent export ``predictor_*`` series that no simulator produces. This module writes
them as OpenMetrics on the same time grid, under the names ``predictor/loop/metrics.py`` and
``predictor/diagnose/bands.py`` define (and, for the XDP agent, the names k8s/METRICS.md expects),
derived from the simulated queue demand, with one incident of each kind the alerts are about, so that
every rule expression has something to return:

- hours 30-34: the loop fails every cycle (stale loop, failing cycles);
- from hour 12 on: nothing is planned, changes are held for ``cooldown`` (plans held for long);
- hour 40: one queue patch is rejected;
- the served model passes its 30-day maximum age at hour 24; it fails to load in hours 44-46;
- hours 36-38: the root-cause model finds gpu_oom on the first node (its findings gauge; triggers counted);
- forecasts for hours 24-36 are 30 % of demand (demand above the band, large error), for hours 36-48
  twice demand plus 4 GPUs (demand below the band, large error), and exact otherwise; the same for the
  per-queue band of the step covering now (anomaly alerts).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from predictor.sources.promql import escape_label_value

HOUR = 3600
_DEMAND = re.compile(
    r'^volcano_queue_request_scalar_resources\{queue_name="([^"]*)",resource="nvidia.com/gpu"\} (\S+) (\d+)$'
)
_NODE = re.compile(r'^kube_node_status_allocatable\{node="([^"]*)",resource="nvidia_com_gpu"')


@dataclass
class SimHistory:
    """What the synthetic series are derived from: demand per queue (GPUs) and the node names."""

    demand: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)

    @property
    def grid(self) -> list[int]:
        return sorted({t for samples in self.demand.values() for t, _ in samples})


def read_sim_history(openmetrics: Path) -> SimHistory:
    demand: dict[str, list[tuple[int, float]]] = defaultdict(list)
    nodes: set[str] = set()
    with openmetrics.open(encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("volcano_queue_request_scalar_resources{"):
                match = _DEMAND.match(line.strip())
                if match:
                    demand[match.group(1)].append((int(match.group(3)), float(match.group(2)) / 1000))
            elif line.startswith("kube_node_status_allocatable{"):
                node = _NODE.match(line)
                if node:
                    nodes.add(node.group(1))
    assert demand and nodes, f"{openmetrics} holds no Volcano queue demand or no nodes"
    return SimHistory({q: sorted(s) for q, s in demand.items()}, sorted(nodes))


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, series: Iterable[tuple[dict[str, str], list[tuple[int, float]]]]) -> None:
        sample_name = f"{name}_total" if kind == "counter" else name
        self.lines.append(f"# TYPE {name} {kind}")
        for labels, samples in series:
            text = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in sorted(labels.items()))
            self.lines.extend(f"{sample_name}{{{text}}} {value!r} {stamp}" for stamp, value in sorted(samples))


def _counter(grid: list[int], per_hour: dict[int, float]) -> list[tuple[int, float]]:
    """A counter sampled on ``grid`` that grows by ``per_hour[h]`` at the start of hour ``h`` (from 0)."""
    start, total, out = grid[0], 0.0, []
    for stamp in grid:
        hour = (stamp - start) // HOUR
        if (stamp - start) % HOUR == 0:
            total += per_hour.get(hour, 0.0)
        out.append((stamp, total))
    return out


def project_openmetrics(history: SimHistory) -> str:
    """The ``predictor_*`` families as OpenMetrics lines (no ``# EOF``: append to the simulator's file)."""
    grid = history.grid
    start = grid[0]
    hours = (grid[-1] - start) // HOUR + 1
    outage = range(30, 34)
    out = _Writer()

    out.family(
        "predictor_loop_cycles",
        "counter",
        [
            ({"result": "ok"}, _counter(grid, {h: 1.0 for h in range(hours) if h not in outage})),
            ({"result": "error"}, _counter(grid, {h: 1.0 for h in outage})),
            ({"result": "held"}, _counter(grid, {h: 1.0 for h in range(0, hours, 5)})),
        ],
    )
    last_ok: list[tuple[int, float]] = []
    success = float(start)
    for stamp in grid:
        if (stamp - start) // HOUR not in outage and (stamp - start) % HOUR == 0:
            success = float(stamp)
        last_ok.append((stamp, success))
    out.family("predictor_loop_last_success_timestamp_seconds", "gauge", [({}, last_ok)])
    out.family("predictor_loop_cycle_duration_seconds", "gauge", [({}, [(t, 42.0) for t in grid])])
    out.family(
        "predictor_loop_changes",
        "counter",
        [
            ({"mode": "server-dry-run", "outcome": "dry-run-ok"}, _counter(grid, {h: 2.0 for h in range(0, 12, 3)})),
            ({"mode": "server-dry-run", "outcome": "rejected"}, _counter(grid, {40: 1.0})),
        ],
    )
    out.family(
        "predictor_loop_held",
        "counter",
        [
            ({"reason": "dead_band"}, _counter(grid, {h: 3.0 for h in range(hours)})),
            ({"reason": "cooldown"}, _counter(grid, {h: 1.0 for h in range(12, hours)})),
        ],
    )

    def forecast_for(target: int, demand: float) -> float:
        hour = (target - start) / HOUR
        if 24 <= hour < 36:
            return 0.3 * demand
        if 36 <= hour < 48:
            return 2 * demand + 4
        return demand

    bands, quotas = [], []
    for queue, samples in sorted(history.demand.items()):
        by_time = dict(samples)
        # Published at t: the forecast for t + 1 h (what the loop's first forecast row is).
        mean = [(t, forecast_for(t + HOUR, by_time.get(t + HOUR, samples[-1][1]))) for t, _ in samples]
        bands.append(({"queue": queue, "band": "mean"}, mean))
        for level, width in (("80", 0.1), ("95", 0.2)):
            bands.append(({"queue": queue, "band": f"hi-{level}"}, [(t, m * (1 + width) + 1) for t, m in mean]))
            lower = [(t, max(m * (1 - width) - 1, 0.0)) for t, m in mean]
            bands.append(({"queue": queue, "band": f"lo-{level}"}, lower))
        quotas.append(({"queue": queue, "field": "deserved"}, [(t, float(round(m * 1.2 + 1))) for t, m in mean]))
    out.family("predictor_loop_forecast_gpus", "gauge", bands)
    # predictor.diagnose.bands: per queue (series = queue name), the 80 % band of the step covering now.
    upper, lower = [], []
    for queue, samples in sorted(history.demand.items()):
        now_mean = [(t, forecast_for(t, d)) for t, d in samples]
        band = {"series": queue, "level": "80"}
        upper.append((band, [(t, m * 1.1 + 1) for t, m in now_mean]))
        lower.append((band, [(t, max(m * 0.9 - 1, 0.0)) for t, m in now_mean]))
    out.family("predictor_forecast_upper", "gauge", upper)
    out.family("predictor_forecast_lower", "gauge", lower)
    out.family("predictor_loop_desired_quota_gpus", "gauge", quotas)
    model = {"family": "gpu-forecast", "version": "3"}
    out.family("predictor_loop_model_info", "gauge", [(model, [(t, 1.0) for t in grid])])
    served = {"family": "gpu-forecast", "uri": "models:/gpu-forecast/3"}
    out.family("predictor_loop_served_model_info", "gauge", [(served, [(t, 1.0) for t in grid])])
    family = {"family": "gpu-forecast"}
    failing = [t for t in grid if 44 <= (t - start) / HOUR < 46]  # the champion fails to load: last good kept
    stale = [(t, 1.0 if t in failing else 0.0) for t in grid]
    out.family("predictor_loop_served_model_stale", "gauge", [(family, stale)])
    failures = _counter(grid, {44: 1.0, 45: 1.0})
    out.family("predictor_loop_model_load_failures", "counter", [(family, failures)])
    # the served version was registered 29 days before the history starts: past the 30-day maximum at hour 24
    age = [(t, 29 * 86400.0 + (t - start)) for t in grid]
    out.family("predictor_loop_model_age_seconds", "gauge", [(family, age)])
    out.family("predictor_loop_model_max_age_seconds", "gauge", [(family, [(t, 30 * 86400.0) for t in grid])])
    promotion = {"family": "gpu-forecast", "version": "3", "decision": "newer_data"}
    out.family("predictor_loop_model_promotion_info", "gauge", [(promotion, [(t, 1.0) for t in grid])])
    # planner.react_pending_gpus: re-plans between slots, and the reads of queues + pending that failed
    out.family("predictor_loop_react_cycles", "counter", [({}, [(t, 0.0) for t in grid])])
    out.family("predictor_loop_react_read_failures", "counter", [({}, [(t, 0.0) for t in grid])])
    # root-cause diagnosis (loop.diagnose): a restart triggers diagnoses in hours 36-38, which find gpu_oom
    out.family(
        "predictor_loop_rca_triggers", "counter", [({"trigger": "job_restart"}, _counter(grid, {36: 1.0, 37: 1.0}))]
    )
    out.family("predictor_loop_rca_diagnoses", "counter", [({"result": "ok"}, _counter(grid, {36: 1.0, 37: 1.0}))])
    finding = {"cause": "gpu_oom", "node": history.nodes[0], "queue": sorted(history.demand)[0]}
    # outside the incident the same finding at a probability below the alert's threshold (min_probability 0.2)
    found = [(t, 0.93 if 36 <= (t - start) / HOUR < 38 else 0.3) for t in grid]
    out.family("predictor_rca_finding", "gauge", [(finding, found)])
    # the capacity-collapse hold and the high-water mark it is measured against
    out.family("predictor_loop_capacity_hold", "gauge", [({}, [(t, 0.0) for t in grid])])
    reference = {"resource": "nvidia.com/gpu"}
    out.family("predictor_loop_capacity_reference_gpus", "gauge", [(reference, [(t, 128.0) for t in grid])])
    out.family(
        "predictor_loop_fragmentation",
        "gauge",
        [
            ({"measure": measure}, [(t, value) for t in grid])
            for measure, value in (("fgd_gpus", 6.0), ("rate", 0.05), ("free_gpus", 20.0), ("free_nodes", 1.0))
        ],
    )

    targets, passed, profiles = [], [], []
    for index, node in enumerate(history.nodes):
        profile = f"{node}-balanced"
        for target, pps in (("eth1", 1000.0 + index), ("eth2", 3000.0)):
            labels = {"node": node, "iface": "eth0", "target": target, "profile": profile}
            targets.append((labels, [(t, pps * (t - start)) for t in grid]))
        passed.append(({"node": node, "iface": "eth0"}, [(t, 50.0 * (t - start)) for t in grid]))
        profiles.append(({"node": node, "iface": "eth0", "profile": profile}, [(t, 1.0) for t in grid]))
    out.family("predictor_xdp_target_packets", "counter", targets)
    out.family("predictor_xdp_passed_packets", "counter", passed)
    out.family("predictor_xdp_active_profile_info", "gauge", profiles)
    return "\n".join(out.lines) + "\n"


def combine(sim_openmetrics: Path, history: SimHistory, out: Path) -> Path:
    """The simulator's file followed by the project's families, with one final ``# EOF`` (streamed)."""
    saw_eof = False
    with sim_openmetrics.open(encoding="utf-8") as source, out.open("w", encoding="utf-8") as sink:
        for line in source:
            if line.strip() == "# EOF":
                saw_eof = True
                continue
            sink.write(line)
        sink.write(project_openmetrics(history))
        sink.write("# EOF\n")
    assert saw_eof, f"{sim_openmetrics} does not end with # EOF"
    return out
