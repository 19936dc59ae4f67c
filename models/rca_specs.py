"""The symptom feature table: name, source series, meaning and unit of every root-cause feature.

One list drives three things that must never disagree: the columns ``window_features`` produces, the units
in the tree's explanations, and ``predictor/diagnose/FEATURES.md`` (a test compares them).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FEATURE_NAMES", "SPECS", "FeatureSpec", "feature_table_markdown"]


@dataclass(frozen=True)
class FeatureSpec:
    name: str
    source: str
    meaning: str
    unit: str = ""


SPECS: tuple[FeatureSpec, ...] = (
    FeatureSpec("is_queue", "(scope kind)", "1 for a Volcano-queue candidate, 0 for a node candidate"),
    FeatureSpec("gpu_temp_p95_max", "DCGM_FI_DEV_GPU_TEMP", "hottest GPU's p95 temperature in the window", "°C"),
    FeatureSpec("gpu_temp_delta_max", "DCGM_FI_DEV_GPU_TEMP", "largest rise of a GPU's median temperature vs "
                "the preceding window", "°C"),
    FeatureSpec("sm_clock_drop_max", "DCGM_FI_DEV_SM_CLOCK, DCGM_FI_DEV_GPU_UTIL", "largest drop of a busy GPU's "
                "median SM clock below the node's busy-clock p90 over both windows", "ratio"),
    FeatureSpec("gpu_power_drop_max", "DCGM_FI_DEV_POWER_USAGE", "largest drop of a GPU's median power vs the "
                "preceding window", "ratio"),
    FeatureSpec("throttle_power_frac_max", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "most samples of a GPU with "
                "the power-cap bit (0x4) set", "ratio"),
    FeatureSpec("throttle_thermal_frac_max", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "most samples of a GPU with "
                "a thermal/HW-slowdown bit (0x8, 0x20, 0x40) set", "ratio"),
    FeatureSpec("xid_max", "DCGM_FI_DEV_XID_ERRORS", "largest last-XID code reported on the node (0: none)"),
    FeatureSpec("ecc_dbe_increase", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "double-bit ECC errors counted in the "
                "window, node total"),
    FeatureSpec("nvlink_crc_rate_max", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "largest NVLink CRC "
                "error rate of a GPU", "/s"),
    FeatureSpec("nvlink_bw_ratio", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "node NVLink traffic rate vs the "
                "preceding window", "ratio"),
    FeatureSpec("fb_used_frac_max", "DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_FB_FREE", "fullest GPU memory in the "
                "window (used / (used + free))", "ratio"),
    FeatureSpec("gpu_util_mean", "DCGM_FI_DEV_GPU_UTIL", "mean utilisation of the node's busy GPUs", "%"),
    FeatureSpec("gpu_util_ratio", "DCGM_FI_DEV_GPU_UTIL", "node utilisation vs the preceding window (GPUs busy "
                "before)", "ratio"),
    FeatureSpec("gpu_util_ratio_min", "DCGM_FI_DEV_GPU_UTIL", "lowest per-GPU utilisation ratio vs the preceding "
                "window", "ratio"),
    FeatureSpec("gpu_util_cv_mean", "DCGM_FI_DEV_GPU_UTIL", "mean coefficient of variation of busy GPUs' "
                "utilisation (jitter, sawtooth)", "ratio"),
    FeatureSpec("gpu_util_low_frac_max", "DCGM_FI_DEV_GPU_UTIL", "most samples < 3 % of a GPU that was busy "
                "before (hang, restart)", "ratio"),
    FeatureSpec("dcgm_coverage", "DCGM_FI_DEV_GPU_UTIL", "samples present vs expected for the node's GPUs "
                "(not scraped → low)", "ratio"),
    FeatureSpec("job_nodes", "DCGM pod labels, kube_pod_labels", "nodes used by the job holding most GPUs here"),
    FeatureSpec("job_util_ratio", "DCGM_FI_DEV_GPU_UTIL", "that job's utilisation vs the preceding window, "
                "over all its GPUs", "ratio"),
    FeatureSpec("job_util_ratio_spread", "DCGM_FI_DEV_GPU_UTIL", "spread (std) of the per-GPU utilisation ratio "
                "across the job's GPUs", "ratio"),
    FeatureSpec("tcp_retrans_rate", "node_netstat_Tcp_RetransSegs", "TCP retransmitted segments", "/s"),
    FeatureSpec("tcp_retrans_ratio", "node_netstat_Tcp_RetransSegs", "retransmit rate vs the preceding window "
                "((w+1)/(p+1))", "ratio"),
    FeatureSpec("net_drop_rate", "node_network_receive_drop_total", "received packets dropped, all devices", "/s"),
    FeatureSpec("net_rx_ratio", "node_network_receive_bytes_total", "receive throughput vs the preceding window",
                "ratio"),
    FeatureSpec("cpu_iowait_frac", "node_cpu_seconds_total{mode=iowait}", "share of CPU time in iowait", "ratio"),
    FeatureSpec("cpu_user_frac", "node_cpu_seconds_total{mode=user}", "share of CPU time in user mode", "ratio"),
    FeatureSpec("load1_ratio", "node_load1", "1-minute load vs the preceding window", "ratio"),
    FeatureSpec("node_ready_min", "kube_node_status_condition{condition=Ready,status=true}", "lowest Ready "
                "condition in the window (0: not ready)"),
    FeatureSpec("node_allocatable_ratio", "kube_node_status_allocatable, kube_node_status_capacity "
                "{resource=nvidia_com_gpu}", "allocatable GPUs vs capacity (a GPU marked unhealthy → < 1)",
                "ratio"),
    FeatureSpec("pod_restarts_increase", "kube_pod_container_status_restarts_total", "container restarts in the "
                "window of pods on the node"),
    FeatureSpec("oom_killed", "kube_pod_container_status_last_terminated_reason{reason=OOMKilled}", "1 if a pod "
                "on the node was last terminated by OOMKilled in the window"),
    FeatureSpec("alerts_firing", "ALERTS{alertstate=firing}", "firing alerts naming the node (NaN without ALERTS)"),
    FeatureSpec("queue_capability_ratio", "volcano_queue_capacity_scalar_resources", "queue capability now vs "
                "the preceding window (min / max)", "ratio"),
    FeatureSpec("queue_capability_gpus", "volcano_queue_capacity_scalar_resources", "lowest queue capability in "
                "the window", "GPUs"),
    FeatureSpec("queue_deserved_ratio", "volcano_queue_deserved_scalar_resources", "queue deserved now vs the "
                "preceding window (min / max)", "ratio"),
    FeatureSpec("queue_pending_delta", "volcano_queue_pod_group_pending_count", "pending PodGroups, max now "
                "minus median before"),
    FeatureSpec("queue_pending_gpus", "volcano_queue_{request,allocated}_scalar_resources", "GPUs requested but "
                "not allocated (median)", "GPUs"),
    FeatureSpec("queue_alloc_ratio", "volcano_queue_allocated_scalar_resources", "allocated GPUs vs the preceding "
                "window", "ratio"),
)
FEATURE_NAMES: tuple[str, ...] = tuple(s.name for s in SPECS)


def feature_table_markdown() -> str:
    """The feature table as Markdown (source of ``FEATURES.md``)."""
    lines = ["| feature | source series | meaning | unit |", "|---|---|---|---|"]
    lines += [f"| `{s.name}` | `{s.source}` | {s.meaning} | {s.unit} |" for s in SPECS]
    return "\n".join(lines) + "\n"
