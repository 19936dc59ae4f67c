"""The catalogue of simulator configurations the root-cause tree learns from, grouped into families.

Why families: a tree trained and scored on one simulator configuration learns its absolute sizes (it once
answered "queue capability ≤ 24 GPUs" at probability 0.996 on another cluster). Holding out a whole *family* (all
clusters with many queues, all tight quotas, all 100+ node clusters...) and scoring on it is the closest
offline stand-in for "another team's cluster". ``pipelines.rca_perturb`` adds what the simulator does
not draw by itself (hot-but-healthy GPUs, noisy neighbours, families a cluster does not scrape).
"""

from __future__ import annotations

from pipelines.rca_data import Scenario

__all__ = ["CONFIG_FAMILIES", "DROPPABLE", "MISSING_SHARE", "all_scenarios", "missing_groups"]

# Families a real cluster may lack (each alone, as in the measured failure: no Volcano request series).
DROPPABLE = (
    ("volcano_queue_request_scalar_resources",),
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",),
    ("volcano_queue_pod_group_pending_count",),
    ("node_netstat_Tcp_RetransSegs", "node_network_receive_drop_total"),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"),
    ("kube_pod_container_status_last_terminated_reason", "kube_node_status_allocatable"),
)


def _family(name: str, seeds: range, **kw: object) -> tuple[Scenario, ...]:
    out = []
    for i, seed in enumerate(seeds):
        params = {k: (v[i % len(v)] if isinstance(v, list) else v) for k, v in kw.items()}
        out.append(Scenario(seed=seed, family=name, fault_onsets=True, **params))  # type: ignore[arg-type]
    return tuple(out)


# Each family: a few seeds; list-valued settings cycle across its seeds. A few seeds of other families also
# carry some hot-but-healthy GPUs and noisy neighbours: holding out "hot-noisy" must not leave training
# without any (they are everyday on real clusters), and no family is tuned on its own held-out score.
# Faults are dense (rate per day) so short runs still hold every cause; the 100+ node family is short because it is big.
CONFIG_FAMILIES: dict[str, tuple[Scenario, ...]] = {
    "small": _family(
        "small",
        range(200, 204),
        nodes=[2, 3, 4, 2],
        queues=[1, 2, 3, 0],
        days=0.5,
        fault_rate_per_day=[90, 120, 120, 90],
    ),
    "medium": _family(
        "medium",
        range(210, 214),
        nodes=[8, 12, 16, 10],
        days=0.5,
        fault_rate_per_day=[90, 110],
        hot_gpus=[0.0, 0.08, 0.0, 0.05],
        noisy_nodes=[0.15, 0.0, 0.1, 0.0],
    ),
    "many-queues": _family(
        "many-queues",
        range(220, 223),
        nodes=[10, 16, 24],
        queues=[20, 35, 50],
        days=0.5,
        fault_rate_per_day=[110, 140, 160],
    ),
    "tight-quota": _family(
        "tight-quota",
        range(230, 233),
        nodes=[6, 10, 14],
        capability=[0.3, 0.5, 0.4],
        jobs_per_hour=[45.0, 60.0, 50.0],
        days=0.5,
        fault_rate_per_day=[90, 110],
        noisy_nodes=[0.0, 0.1, 0.0],
        hot_gpus=[0.05, 0.0, 0.0],
    ),
    "hot-noisy": _family(
        "hot-noisy",
        range(240, 243),
        nodes=[6, 10, 8],
        hot_gpus=[0.1, 0.2, 0.15],
        noisy_nodes=[0.2, 0.3, 0.25],
        days=0.5,
        fault_rate_per_day=[90, 110],
    ),
    "large": _family(
        "large", range(250, 253), nodes=[64, 160, 512], days=[0.2, 0.12, 0.06], fault_rate_per_day=[500, 900, 1000]
    ),
    "wide-network": _family(
        "wide-network",
        range(270, 273),
        nodes=[24, 32, 40],
        days=0.5,
        fault_rate_per_day=[150, 180, 220],
        noisy_nodes=[0.1, 0.0, 0.0],
        hot_gpus=[0.0, 0.05, 0.0],
    ),
    "missing-families": _family(
        "missing-families",
        range(260, 266),
        nodes=[6, 10, 8, 12, 6, 9],
        days=0.5,
        fault_rate_per_day=[90, 110],
        drop=list(DROPPABLE),
    ),
}


def all_scenarios(exclude: str | None = None) -> tuple[Scenario, ...]:
    """Every scenario of every family, except the ``exclude``d one (the held-out family)."""
    return tuple(s for name, group in CONFIG_FAMILIES.items() if name != exclude for s in group)


def missing_groups() -> tuple[tuple[str, ...], ...]:
    """Per droppable family group, the features it makes NaN (what training masks at random)."""
    from models.rca_specs import features_of_family

    groups = (*DROPPABLE, ("DCGM_FI_DEV_GPU_TEMP",), ("node_load1",), ("kube_node_status_condition",))
    return tuple(tuple(sorted({f for fam in g for f in features_of_family(fam)})) for g in groups)


MISSING_SHARE = 0.3  # share of training rows copied with one family group masked
