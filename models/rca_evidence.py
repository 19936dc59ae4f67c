"""The symptoms an engineer reads for each root cause, first choice first: the cause's own evidence.

This is what "the families a cause needs" means in the documentation and in a remediation: the metric families
carrying its symptoms, not whatever a fitted tree happens to split on on the way to it (a tree may separate a
cause with a feature that merely correlates with it in the training simulator). The first symptom is the one
a platform engineer reaches for; the others confirm it or stand in when the first is not exported. The same
table gives the one-threshold-per-cause baseline its candidate features.
"""

from __future__ import annotations

from models.rca_specs import SPECS

__all__ = ["EVIDENCE", "evidence_families", "signal_families"]

# cause → (feature, direction) in the order an engineer would reach for them.
EVIDENCE: dict[str, tuple[tuple[str, str], ...]] = {
    "node_not_ready": (("node_ready_min", "<"),),
    "gpu_hardware": (("xid_max", ">"), ("ecc_dbe_increase", ">")),
    "nvlink": (("nvlink_crc_rate_max", ">"), ("nvlink_replay_rate_max", ">"), ("xid_nvlink", ">")),
    "gpu_oom": (("fb_used_frac_max", ">"),),
    "gpu_thermal": (("throttle_thermal_frac_max", ">"), ("gpu_temp_p95_max", ">")),
    "gpu_power_cap": (("throttle_power_frac_max", ">"), ("gpu_power_drop_max", ">")),
    "network_congestion": (("tcp_retrans_ratio", ">"), ("net_drop_ratio", ">")),
    "io_stall": (("cpu_iowait_frac", ">"),),
    "cpu_contention": (("cpu_user_frac", ">"), ("load1_ratio", ">")),
    "scheduling_starvation": (("queue_capability_vs_use", "<"), ("queue_pending_ratio", ">")),
    "roce_pfc_storm": (("pfc_pause_ratio", ">"),),
    "roce_congestion": (("roce_ecn_ratio", ">"),),
    "nic_link_flap": (("carrier_changes", ">"), ("net_drop_ratio", ">")),
}
_FAMILIES = {s.name: s.families for s in SPECS}


def signal_families(cause: str) -> tuple[str, ...]:
    """The metric families carrying a cause's first-choice symptom (empty for an unknown cause)."""
    first = EVIDENCE.get(cause, ())
    return tuple(_FAMILIES.get(first[0][0], ())) if first else ()


def evidence_families(cause: str) -> tuple[str, ...]:
    """Every metric family carrying one of the cause's symptoms, first choice first, without repeats."""
    return tuple(dict.fromkeys(f for feature, _ in EVIDENCE.get(cause, ()) for f in _FAMILIES.get(feature, ())))
