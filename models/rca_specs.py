"""The symptom feature table: name, source series, meaning, unit and why it is scale-free, per feature.

One list drives five things that must never disagree: the columns ``window_features`` produces, the units
in the tree's explanations, the metric families each feature needs (a missing family makes exactly those
features NaN, which is how training simulates a history without it), the series diagnosis queries and
training keeps (``METRIC_FAMILIES``: every family of a spec plus the context series), and the generated
documentation (``predictor/diagnose/FEATURES.md`` and the "Root-cause features" table of ``docs/design.md``).

Scale-free is the rule: a feature is a ratio to the entity's own preceding window, a robust z-score or
excess against its peers (the node's other GPUs, the cluster's other nodes), a bounded fraction, a
physical quantity with a fixed meaning (°C), or an event code/count of the node itself. Nothing counts
GPUs, queues or nodes, so a tree trained on 8-node simulator clusters reads a 500-node cluster the same.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ABSENT",
    "CONTEXT_FAMILIES",
    "FEATURE_NAMES",
    "METRIC_FAMILIES",
    "NOT_APPLICABLE",
    "POD_LABELS",
    "QUEUE_FEATURES",
    "SCRAPE_HEALTH",
    "SPECS",
    "FeatureSpec",
    "feature_table_markdown",
    "features_of_family",
]

_T, _U, _C, _P = "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_POWER_USAGE"
_THR = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
_CAP, _DES = "volcano_queue_capacity_scalar_resources", "volcano_queue_deserved_scalar_resources"
_REQ, _ALLOC = "volcano_queue_request_scalar_resources", "volcano_queue_allocated_scalar_resources"
_PEND = "volcano_queue_pod_group_pending_count"
_REPLAY, _RECOVERY = "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"
_PAUSE = ("node_ethtool_rx_prio3_pause", "node_ethtool_tx_prio3_pause")
_ECN = ("node_ethtool_np_ecn_marked_roce_packets", "node_ethtool_np_cnp_sent", "node_ethtool_rp_cnp_handled")
_CARRIER = "node_network_carrier_changes_total"
_OWN = "ratio to the same entity's preceding window"
_BOUNDED = "a fraction in [0, 1] of the entity's own samples or resources"
_PEERS = "robust z-score against the cluster's other nodes (median/MAD), so it reads the same at any size"


@dataclass(frozen=True)
class FeatureSpec:
    name: str
    source: str
    meaning: str
    unit: str = ""
    families: tuple[str, ...] = ()
    why: str = ""


SPECS: tuple[FeatureSpec, ...] = (
    FeatureSpec(
        "is_queue", "(scope kind)", "1 for a Volcano-queue candidate, 0 for a node candidate", "", (), "a flag"
    ),
    FeatureSpec(
        "gpu_temp_p95_max",
        _T,
        "hottest GPU's p95 temperature in the window",
        "°C",
        (_T,),
        "a physical temperature with fixed throttle points (≈ 85-90 °C), the same on any cluster",
    ),
    FeatureSpec(
        "gpu_temp_delta_max",
        _T,
        "largest rise of a GPU's median temperature vs the preceding window",
        "°C",
        (_T,),
        "difference to the GPU's own baseline",
    ),
    FeatureSpec(
        "gpu_temp_over_peers",
        _T,
        "hottest GPU's p95 temperature above the median GPU of its node",
        "°C",
        (_T,),
        "excess over the node's own GPUs (same chassis, same airflow)",
    ),
    FeatureSpec(
        "sm_clock_drop_max",
        f"{_C}, {_U}",
        "largest drop of a busy GPU's median SM clock below the node's busy-clock p90 over both windows",
        "ratio",
        (_C, _U),
        "ratio to the node's own GPUs",
    ),
    FeatureSpec(
        "gpu_power_drop_max", _P, "largest drop of a GPU's median power vs the preceding window", "ratio", (_P,), _OWN
    ),
    FeatureSpec(
        "throttle_power_frac_max",
        _THR,
        "most samples of a GPU with the power-cap bit (0x4) set",
        "ratio",
        (_THR,),
        _BOUNDED,
    ),
    FeatureSpec(
        "throttle_thermal_frac_max",
        _THR,
        "most samples of a GPU with a thermal/HW-slowdown bit (0x8, 0x20, 0x40) set",
        "ratio",
        (_THR,),
        _BOUNDED,
    ),
    FeatureSpec(
        "xid_max",
        "DCGM_FI_DEV_XID_ERRORS",
        "largest last-XID code reported on the node, XID 74 (NVLink) left out (0: none)",
        "",
        ("DCGM_FI_DEV_XID_ERRORS",),
        "an error code",
    ),
    FeatureSpec(
        "xid_nvlink",
        "DCGM_FI_DEV_XID_ERRORS",
        "1 if a GPU of the node reported XID 74 (NVLink error)",
        "",
        ("DCGM_FI_DEV_XID_ERRORS",),
        "a flag",
    ),
    FeatureSpec(
        "ecc_dbe_increase",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "double-bit ECC errors counted in the window on the node",
        "",
        ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",),
        "events of one node's GPUs (healthy: 0), independent of cluster size",
    ),
    FeatureSpec(
        "nvlink_crc_rate_max",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "largest NVLink CRC flit error rate of a GPU",
        "/s",
        ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",),
        "per-link error rate of one GPU (healthy: 0)",
    ),
    FeatureSpec(
        "nvlink_replay_rate_max",
        f"{_REPLAY}, {_RECOVERY}",
        "largest NVLink replay + recovery error rate of a GPU",
        "/s",
        (_REPLAY, _RECOVERY),
        "per-link error rate of one GPU (healthy: 0)",
    ),
    FeatureSpec(
        "nvlink_bw_ratio",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "node NVLink traffic rate vs the preceding window",
        "ratio",
        ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",),
        _OWN,
    ),
    FeatureSpec(
        "fb_used_frac_max",
        "DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_FB_FREE",
        "fullest GPU memory in the window (used / (used + free))",
        "ratio",
        ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"),
        _BOUNDED,
    ),
    FeatureSpec("gpu_util_mean", _U, "mean utilisation of the node's busy GPUs", "%", (_U,), "a percentage"),
    FeatureSpec(
        "gpu_util_ratio", _U, "node utilisation vs the preceding window (GPUs busy before)", "ratio", (_U,), _OWN
    ),
    FeatureSpec(
        "gpu_util_ratio_min", _U, "lowest per-GPU utilisation ratio vs the preceding window", "ratio", (_U,), _OWN
    ),
    FeatureSpec(
        "gpu_util_cv_mean",
        _U,
        "mean coefficient of variation of busy GPUs' utilisation (jitter, sawtooth)",
        "ratio",
        (_U,),
        "std / mean of the GPU's own samples",
    ),
    FeatureSpec(
        "gpu_util_low_frac_max",
        _U,
        "most samples < 3 % of a GPU that was busy before (hang, restart)",
        "ratio",
        (_U,),
        _BOUNDED,
    ),
    FeatureSpec(
        "dcgm_coverage",
        _U,
        "samples present vs expected for the node's GPUs (not scraped → low)",
        "ratio",
        (_U,),
        _BOUNDED,
    ),
    FeatureSpec(
        "job_multi_node",
        "DCGM pod labels, kube_pod_labels",
        "1 if the job holding most GPUs here spans more than one node",
        "",
        (_U,),
        "a flag (the node count itself would grow with the cluster)",
    ),
    FeatureSpec(
        "job_util_ratio", _U, "that job's utilisation vs the preceding window, over all its GPUs", "ratio", (_U,), _OWN
    ),
    FeatureSpec(
        "job_util_ratio_spread",
        _U,
        "spread (std) of the per-GPU utilisation ratio across the job's GPUs",
        "ratio",
        (_U,),
        "spread of own-baseline ratios",
    ),
    FeatureSpec(
        "tcp_retrans_ratio",
        "node_netstat_Tcp_RetransSegs",
        "retransmit rate vs the preceding window ((w+1)/(p+1))",
        "ratio",
        ("node_netstat_Tcp_RetransSegs",),
        _OWN,
    ),
    FeatureSpec(
        "tcp_retrans_per_mb",
        "node_netstat_Tcp_RetransSegs, node_network_receive_bytes_total",
        "TCP retransmitted segments per MB received",
        "",
        ("node_netstat_Tcp_RetransSegs", "node_network_receive_bytes_total"),
        "per unit of the node's own traffic (a loss rate), whatever the cluster or link size",
    ),
    FeatureSpec(
        "tcp_retrans_peer_z",
        "node_netstat_Tcp_RetransSegs",
        "log retransmit rate against the other nodes",
        "",
        ("node_netstat_Tcp_RetransSegs",),
        _PEERS,
    ),
    FeatureSpec(
        "net_drop_ratio",
        "node_network_receive_drop_total",
        "received-packet drop rate vs the preceding window ((w+1)/(p+1))",
        "ratio",
        ("node_network_receive_drop_total",),
        _OWN,
    ),
    FeatureSpec(
        "net_drop_per_gb",
        "node_network_receive_drop_total, node_network_receive_bytes_total",
        "received packets dropped per GB received",
        "",
        ("node_network_receive_drop_total", "node_network_receive_bytes_total"),
        "per unit of the node's own traffic (a loss rate)",
    ),
    FeatureSpec(
        "net_drop_peer_z",
        "node_network_receive_drop_total",
        "log drop rate against the other nodes",
        "",
        ("node_network_receive_drop_total",),
        _PEERS,
    ),
    FeatureSpec(
        "net_rx_ratio",
        "node_network_receive_bytes_total",
        "receive throughput vs the preceding window",
        "ratio",
        ("node_network_receive_bytes_total",),
        _OWN,
    ),
    FeatureSpec(
        "net_rx_vs_util",
        f"node_network_receive_bytes_total, {_U}",
        "receive-throughput ratio over the "
        "node's GPU-utilisation ratio (both vs the preceding window): < 1 when traffic fell more than GPU "
        "work did, as when a job waits on a congested network (NCCL kernels keep the GPU busy while they "
        "wait)",
        "ratio",
        ("node_network_receive_bytes_total", _U),
        "ratio of two own-baseline ratios",
    ),
    FeatureSpec(
        "pfc_pause_ratio",
        ", ".join(_PAUSE),
        "PFC pause frames (priority 3, RoCE) received + sent vs the preceding window ((w+1)/(p+1))",
        "ratio",
        _PAUSE,
        _OWN,
    ),
    FeatureSpec(
        "pfc_pause_peer_z", ", ".join(_PAUSE), "log pause-frame rate against the other nodes", "", _PAUSE, _PEERS
    ),
    FeatureSpec(
        "roce_ecn_ratio",
        ", ".join(_ECN),
        "ECN-marked RoCE packets + CNPs sent + CNPs handled vs the preceding window ((w+1)/(p+1))",
        "ratio",
        _ECN,
        _OWN,
    ),
    FeatureSpec("roce_ecn_peer_z", ", ".join(_ECN), "log ECN/CNP rate against the other nodes", "", _ECN, _PEERS),
    FeatureSpec(
        "carrier_changes",
        _CARRIER,
        "link carrier changes (down or up) in the window on the node",
        "",
        (_CARRIER,),
        "events of one node's links (healthy: 0)",
    ),
    FeatureSpec(
        "cpu_iowait_frac",
        "node_cpu_seconds_total{mode=iowait}",
        "share of CPU time in iowait",
        "ratio",
        ("node_cpu_seconds_total",),
        _BOUNDED,
    ),
    FeatureSpec(
        "cpu_iowait_peer_z",
        "node_cpu_seconds_total{mode=iowait}",
        "iowait share against the other nodes",
        "",
        ("node_cpu_seconds_total",),
        _PEERS,
    ),
    FeatureSpec(
        "cpu_user_frac",
        "node_cpu_seconds_total{mode=user}",
        "share of CPU time in user mode",
        "ratio",
        ("node_cpu_seconds_total",),
        _BOUNDED,
    ),
    FeatureSpec("load1_ratio", "node_load1", "1-minute load vs the preceding window", "ratio", ("node_load1",), _OWN),
    FeatureSpec(
        "node_ready_min",
        "kube_node_status_condition{condition=Ready,status=true}",
        "lowest Ready condition in the window (0: not ready)",
        "",
        ("kube_node_status_condition",),
        "a 0/1 condition",
    ),
    FeatureSpec(
        "node_allocatable_ratio",
        "kube_node_status_allocatable, kube_node_status_capacity {resource=nvidia_com_gpu}",
        "allocatable GPUs vs capacity (a GPU marked unhealthy → < 1)",
        "ratio",
        ("kube_node_status_allocatable", "kube_node_status_capacity"),
        "ratio of the node's own resources",
    ),
    FeatureSpec(
        "pod_restarts_increase",
        "kube_pod_container_status_restarts_total",
        "container restarts in the window of pods on the node",
        "",
        ("kube_pod_container_status_restarts_total",),
        "events of one node's pods (8 GPUs → a handful of pods at any cluster size)",
    ),
    FeatureSpec(
        "oom_killed",
        "kube_pod_container_status_last_terminated_reason{reason=OOMKilled}",
        "1 if a pod on the node was last terminated by OOMKilled in the window",
        "",
        ("kube_pod_container_status_last_terminated_reason",),
        "a flag",
    ),
    FeatureSpec(
        "alerts_firing", "ALERTS{alertstate=firing}", "1 if an alert naming the node fires", "", ("ALERTS",), "a flag"
    ),
    FeatureSpec(
        "queue_capability_ratio",
        _CAP,
        "queue capability now vs the preceding window (min / max)",
        "ratio",
        (_CAP,),
        _OWN,
    ),
    FeatureSpec(
        "queue_capability_vs_use",
        f"{_CAP}, {_ALLOC}",
        "lowest capability in the window vs the most "
        "GPUs the queue held in either window (< 1: the cap is below its own use)",
        "ratio",
        (_CAP, _ALLOC),
        "ratio of two of the queue's own quantities (no absolute quota size)",
    ),
    FeatureSpec(
        "queue_capability_zero",
        _CAP,
        "1 if the queue's capability is 0 in the window (nothing can run)",
        "",
        (_CAP,),
        "a flag: zero is zero on any cluster",
    ),
    FeatureSpec(
        "queue_deserved_ratio", _DES, "queue deserved now vs the preceding window (min / max)", "ratio", (_DES,), _OWN
    ),
    FeatureSpec(
        "queue_pending_ratio", _PEND, "pending PodGroups, (max now + 1) / (median before + 1)", "ratio", (_PEND,), _OWN
    ),
    FeatureSpec(
        "queue_unmet_frac",
        f"{_REQ}, {_ALLOC}",
        "share of the queue's requested GPUs not allocated (median)",
        "ratio",
        (_REQ, _ALLOC),
        _BOUNDED,
    ),
    FeatureSpec("queue_alloc_ratio", _ALLOC, "allocated GPUs vs the preceding window", "ratio", (_ALLOC,), _OWN),
)
FEATURE_NAMES: tuple[str, ...] = tuple(s.name for s in SPECS)
# Series no feature is computed from but that qualify the others: pod labels map pods to Volcano jobs
# (the ``job_*`` features), and Prometheus' scrape health tells a node gone dark (``ABSENT``) from one
# whose exporter was never deployed.
POD_LABELS, SCRAPE_HEALTH = "kube_pod_labels", "up"
CONTEXT_FAMILIES: tuple[str, ...] = (POD_LABELS, SCRAPE_HEALTH)
# What diagnosis queries and training keeps of a simulator run, derived so that a family a new feature
# reads cannot be left out: every family of a spec (first use first), then the context series.
METRIC_FAMILIES: tuple[str, ...] = tuple(dict.fromkeys([*(f for s in SPECS for f in s.families), *CONTEXT_FAMILIES]))
QUEUE_FEATURES = frozenset(n for n in FEATURE_NAMES if n.startswith("queue_"))
# The value of a feature that does not exist for a candidate (a queue's GPU temperature): below any real
# value, so the tree routes it like a value; NaN is reserved for "exists but not measured".
NOT_APPLICABLE = -1e6
# The value of a node feature whose series the node itself stopped reporting while others still report
# the family (a node gone dark: not Ready, exporters unreachable). Below NOT_APPLICABLE, so a split
# between the two reads "not scraped on this node" and is told apart from a split on the candidate kind.
ABSENT = -2e6


def features_of_family(family: str) -> tuple[str, ...]:
    """The features that are NaN when ``family`` is absent from a history."""
    return tuple(s.name for s in SPECS if family in s.families)


def feature_table_markdown() -> str:
    """The feature table as Markdown (source of ``FEATURES.md`` and the design page's table)."""
    lines = ["| feature | source series | meaning | unit | why scale-free |", "|---|---|---|---|---|"]
    lines += [f"| `{s.name}` | `{s.source}` | {s.meaning} | {s.unit} | {s.why} |" for s in SPECS]
    return "\n".join(lines) + "\n"
