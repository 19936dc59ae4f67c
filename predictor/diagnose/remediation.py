"""What to check or change for each root cause: one sentence per finding, with the measured values it rests on.

Kept apart from the engine because it is operational knowledge, not inference: a platform team edits these
lines (their cache product, their NIC vendor's tooling) without touching how findings are ranked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from models.rca import INSUFFICIENT

__all__ = ["INSUFFICIENT", "enable_advice", "how_to_enable", "remediation"]


_ADVICE = {
    "gpu_thermal": "Check the node's cooling (fans, inlet temperature, blocked airflow, a failed PSU fan) and "
    "whether GPU {gpu} throttles on temperature ({temp}); until fixed, drain it or lower its power "
    "cap (nvidia-smi -pl) so it stops throttling the whole job.",
    "gpu_power_cap": "GPU {gpu} is held at its power limit: check the configured cap (nvidia-smi -q -d POWER), "
    "the rack's power budget and PSU health; raise the cap back to default if it was lowered.",
    "gpu_hardware": "GPU {gpu} reported XID {xid}: cordon the node, drain its pods, run a DCGM diagnostic (dcgmi "
    "diag -r 3) and reset or RMA the GPU; restart the job from its last checkpoint elsewhere.",
    "nvlink": "NVLink errors on GPU {gpu} ({crc}): check the NVLink/NVSwitch state (nvidia-smi nvlink -e, "
    "fabric manager logs), reseat or replace the link; meanwhile pin the job to other nodes.",
    "gpu_oom": "GPU memory reached {fb} before restarts: lower the batch size or sequence length, enable "
    "activation checkpointing, or request a GPU with more memory.",
    "network_congestion": "TCP retransmits are {retrans} of their usual rate on the job's nodes: check the "
    "top-of-rack links and switch buffers, spread the job's nodes less, or move its data "
    "traffic to the RDMA fabric.",
    "io_stall": "The job waits on storage (iowait {iowait} of CPU time while its GPUs average {util}): put a "
    "dataset cache in front of the storage (Alluxio or Fluid), prefetch or add data-loader workers, "
    "and compare the measured read rate with what the GPUs consume.",
    "cpu_contention": "The node's CPUs are saturated (user {user}, load {load} of usual): raise the pods' CPU "
    "requests, set the CPU manager's static policy with NUMA-aligned pinning, and move "
    "noisy neighbours off the GPU nodes.",
    "scheduling_starvation": "Queue capability fell to {cap} of what the queue used: check recent Queue edits "
    "(capability, deserved), reclaim settings and the parent queue's quota; the "
    "predictor's own plan file and audit log say whether it made the change.",
    "node_not_ready": "The kubelet stopped reporting Ready: check kubelet and container runtime logs, node "
    "pressure conditions and the node's network; pods on it are rescheduled after the "
    "eviction timeout.",
    "roce_pfc_storm": "PFC pause frames on the node's RDMA NIC ({pause} of usual): find the pausing port (the "
    "receiver that sends pauses), enable the switch's PFC watchdog, and check ECN thresholds "
    "so congestion is signalled before buffers fill.",
    "roce_congestion": "RoCE congestion (ECN-marked packets and CNPs {ecn} of usual): tune the ECN marking "
    "thresholds and DCQCN rate parameters, and check for incast from the job's collective "
    "pattern or oversubscribed spine links.",
    "nic_link_flap": "The NIC link went down and up {flaps} time(s): check the cable/transceiver (ethtool -m, "
    "dmesg for link down), the switch port's error counters, and replace the optic.",
    INSUFFICIENT: "Scrape the missing metric families so a cause can be told apart ({missing}); until then "
    "this window cannot be judged.",
    "healthy": "Nothing to change: every candidate looked like its own baseline and its peers.",
}


def _fmt(value: object, kind: str) -> str:
    if not isinstance(value, (int, float)) or not np.isfinite(value):
        return "not measured"
    v = float(value)
    return {
        "ratio": f"{v:.0%}",
        "x": f"{v:.1f}×",
        "°C": f"{v:.0f} °C",
        "%": f"{v:.0f} %",
        "/s": f"{v:.3g}/s",
        "n": f"{v:.0f}",
    }.get(kind, f"{v:.3g}")


def remediation(cause: str, row: Mapping[str, object], gpu: str | None = None, missing: tuple[str, ...] = ()) -> str:
    """The advice for ``cause`` on one candidate's feature ``row`` (values quoted so the advice can be checked)."""
    text = _ADVICE.get(cause, "No advice recorded for this cause.")
    return text.format(
        gpu=gpu if gpu is not None else "(the node's worst)",
        temp=_fmt(row.get("gpu_temp_p95_max"), "°C"),
        xid=_fmt(row.get("xid_max"), "n"),
        crc=_fmt(row.get("nvlink_crc_rate_max"), "/s"),
        fb=_fmt(row.get("fb_used_frac_max"), "ratio"),
        retrans=_fmt(row.get("tcp_retrans_ratio"), "x"),
        iowait=_fmt(row.get("cpu_iowait_frac"), "ratio"),
        util=_fmt(row.get("gpu_util_mean"), "%"),
        user=_fmt(row.get("cpu_user_frac"), "ratio"),
        load=_fmt(row.get("load1_ratio"), "x"),
        cap=_fmt(row.get("queue_capability_vs_use"), "ratio"),
        pause=_fmt(row.get("pfc_pause_ratio"), "x"),
        ecn=_fmt(row.get("roce_ecn_ratio"), "x"),
        flaps=_fmt(row.get("carrier_changes"), "n"),
        missing=enable_advice(missing) or "none",
    )


_DCGM_COUNTERS = "dcgm-exporter's counters CSV (the file given with -f/--collectors)"
_NODE_EXPORTER = "node_exporter's {} collector (on by default: check it is not disabled with --no-collector.{})"


def how_to_enable(family: str) -> str:
    """How a site turns on the exporter output that yields ``family`` (one clause, no trailing period)."""
    if family.startswith("DCGM_FI_"):
        kind = "counter" if family.endswith("_TOTAL") else "gauge"
        return f"uncomment or add the line `{family}, {kind}, ...` in {_DCGM_COUNTERS}"
    if family.startswith("node_ethtool_"):
        return "run node_exporter with --collector.ethtool (off by default) on the RDMA NIC nodes"
    prefixes = (
        ("node_netstat_", "netstat"),
        ("node_network_carrier", "netclass"),
        ("node_network_", "netdev"),
        ("node_cpu_", "cpu"),
        ("node_load", "loadavg"),
    )
    for prefix, collector in prefixes:
        if family.startswith(prefix):
            return _NODE_EXPORTER.format(collector, collector)
    if family == "kube_pod_labels":
        return "run kube-state-metrics with --metric-labels-allowlist=pods=[volcano.sh/job-name]"
    if family.startswith("kube_"):
        return "deploy kube-state-metrics and let Prometheus scrape it"
    if family.startswith("volcano_"):
        return "let Prometheus scrape the Volcano scheduler's /metrics endpoint"
    if family == "ALERTS":
        return "load alerting rules into Prometheus (ALERTS exists only where rules are evaluated)"
    return "make sure Prometheus scrapes the exporter that serves it"


def enable_advice(families: Iterable[str]) -> str:
    """``family: how`` for each family, one sentence (what an ``insufficient_data`` finding asks for)."""
    return "; ".join(f"{f}: {how_to_enable(f)}" for f in dict.fromkeys(families))
