"""Host, Kubernetes and Volcano-queue symptoms of a window: node_exporter, kube-state-metrics, Volcano.

Split from ``models.rca_features`` (which keeps the GPU symptoms and assembles the rows). Every value is
scale-free (``models.rca_specs``): ratios to the entity's own preceding window, robust z-scores against
the other nodes, bounded fractions, or events of one node. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from models.rca_window import WindowData, col, increase, node_of, quiet, rate, ratio

__all__ = ["host_features", "kube_features", "queue_rows"]


def _matching(labels: pd.DataFrame, where: dict[str, str] | None) -> np.ndarray:
    """Which series (columns) carry every label value in ``where``."""
    keep = np.ones(len(labels), dtype=bool)
    for k, v in (where or {}).items():
        keep &= col(labels, k) == v
    return keep


def _per_node(
    data: WindowData, name: str, stat: Callable[[np.ndarray], np.ndarray], where: dict[str, str] | None = None
) -> pd.Series:
    """``stat`` per series (columns of the window matrix), summed per node."""
    t = data.tables.get(name)
    if t is None:
        return pd.Series(dtype=np.float64)
    keep = _matching(t.labels, where)
    values = stat(t.values[:, keep])
    frame = pd.DataFrame({"node": node_of(t.labels)[keep], "v": values})
    return frame.groupby("node")["v"].sum(min_count=1)


def host_features(data: WindowData, W: slice, P: slice, seconds: float) -> dict[str, dict[str, float]]:
    def rate_in(rows: slice) -> Callable[[np.ndarray], np.ndarray]:
        return lambda m: rate(m[rows], seconds)

    def median(rows: slice) -> Callable[[np.ndarray], np.ndarray]:
        return lambda m: quiet(np.nanmedian, m[rows], axis=0)

    re_w = _per_node(data, "node_netstat_Tcp_RetransSegs", rate_in(W))
    re_p = _per_node(data, "node_netstat_Tcp_RetransSegs", rate_in(P))
    rx_w = _per_node(data, "node_network_receive_bytes_total", rate_in(W))
    rx_p = _per_node(data, "node_network_receive_bytes_total", rate_in(P))
    drop_w = _per_node(data, "node_network_receive_drop_total", rate_in(W))
    drop_p = _per_node(data, "node_network_receive_drop_total", rate_in(P))
    cpu = data.tables.get("node_cpu_seconds_total")
    n_cpu = pd.Series(dtype=np.float64)
    if cpu is not None:
        lab = pd.DataFrame({"node": node_of(cpu.labels), "cpu": col(cpu.labels, "cpu")})
        n_cpu = lab.drop_duplicates().groupby("node")["cpu"].count().astype(np.float64)
    iowait = _per_node(data, "node_cpu_seconds_total", rate_in(W), {"mode": "iowait"})
    user = _per_node(data, "node_cpu_seconds_total", rate_in(W), {"mode": "user"})
    load_w = _per_node(data, "node_load1", median(W))
    load_p = _per_node(data, "node_load1", median(P))
    iowait_frac = iowait / n_cpu.where(n_cpu > 0)
    pause_w, pause_p = (_sum_of(data, _PAUSE, rate_in(r)) for r in (W, P))
    ecn_w, ecn_p = (_sum_of(data, _ECN, rate_in(r)) for r in (W, P))
    flaps = _per_node(data, "node_network_carrier_changes_total", lambda m: increase(m[W]))
    peers = {
        "tcp_retrans_peer_z": _peer_z(np.log1p(re_w), 0.25),
        "net_drop_peer_z": _peer_z(np.log1p(drop_w), 0.25),
        "cpu_iowait_peer_z": _peer_z(iowait_frac, 0.02),
        "pfc_pause_peer_z": _peer_z(np.log1p(pause_w), 0.25),
        "roce_ecn_peer_z": _peer_z(np.log1p(ecn_w), 0.25),
    }
    out: dict[str, dict[str, float]] = {}
    for node in set(re_w.index) | set(load_w.index) | set(iowait.index) | set(rx_w.index):

        def get(s: pd.Series, node: str = node) -> float:
            return float(s.get(node, np.nan))

        out[node] = {
            "tcp_retrans_ratio": (get(re_w) + 1) / (get(re_p) + 1),
            "tcp_retrans_per_mb": float(ratio(get(re_w), get(rx_w) / 1e6)),
            "net_drop_per_gb": float(ratio(get(drop_w), get(rx_w) / 1e9)),
            "net_drop_ratio": (get(drop_w) + 1) / (get(drop_p) + 1),
            "net_rx_ratio": float(ratio(get(rx_w), get(rx_p))),
            "cpu_iowait_frac": get(iowait_frac),
            "cpu_user_frac": get(user) / get(n_cpu) if get(n_cpu) > 0 else np.nan,
            "load1_ratio": float(ratio(get(load_w), get(load_p))),
            "pfc_pause_ratio": (get(pause_w) + 1) / (get(pause_p) + 1),
            "roce_ecn_ratio": (get(ecn_w) + 1) / (get(ecn_p) + 1),
            "carrier_changes": get(flaps),
            **{name: get(z) for name, z in peers.items()},
        }
    return out


_PAUSE = ("node_ethtool_rx_prio3_pause", "node_ethtool_tx_prio3_pause")
_ECN = ("node_ethtool_np_ecn_marked_roce_packets", "node_ethtool_np_cnp_sent", "node_ethtool_rp_cnp_handled")


def _sum_of(data: WindowData, names: tuple[str, ...], stat: Callable[[np.ndarray], np.ndarray]) -> pd.Series:
    """``stat`` per node summed over several families; NaN for a node none of them measures."""
    parts = [_per_node(data, n, stat) for n in names if n in data.tables]
    if not parts:
        return pd.Series(dtype=np.float64)
    return pd.concat(parts, axis=1).sum(axis=1, min_count=1)


def _peer_z(values: pd.Series, floor: float) -> pd.Series:
    """Robust z-score of each node against all nodes (median, 1.4826·MAD, at least ``floor``): how unusual a
    node is among its peers, whatever the cluster's size. NaN with fewer than two measured nodes."""
    v = values.astype(np.float64)
    finite = v[np.isfinite(v)]
    if len(finite) < 2:
        return pd.Series(np.nan, index=v.index)
    med = float(finite.median())
    mad = float((finite - med).abs().median()) * 1.4826
    return (v - med) / max(mad, floor)


def kube_features(data: WindowData, W: slice, gpu: pd.DataFrame) -> dict[str, dict[str, float]]:
    def wmin(m: np.ndarray) -> np.ndarray:
        return quiet(np.nanmin, m[W], axis=0)

    def wmax(m: np.ndarray) -> np.ndarray:
        return quiet(np.nanmax, m[W], axis=0)

    ready = _per_node(data, "kube_node_status_condition", wmin, {"condition": "Ready", "status": "true"})
    alloc = _per_node(data, "kube_node_status_allocatable", wmin, {"resource": "nvidia_com_gpu"})
    cap = _per_node(data, "kube_node_status_capacity", wmax, {"resource": "nvidia_com_gpu"})
    pods = gpu[gpu["pod"] != ""][["node", "namespace", "pod"]].drop_duplicates()
    pod_node = {(ns, p): n for n, ns, p in pods.itertuples(index=False)}

    def by_pod(name: str, stat: Callable[[np.ndarray], np.ndarray], where: dict[str, str] | None = None) -> pd.Series:
        t = data.tables.get(name)
        if t is None:
            return pd.Series(dtype=np.float64)
        keep = _matching(t.labels, where)
        node = np.array(
            [pod_node.get((ns, p), "") for ns, p in zip(col(t.labels, "namespace"), col(t.labels, "pod"), strict=True)]
        )
        frame = pd.DataFrame({"node": node[keep], "v": stat(t.values[:, keep])})
        return frame[frame["node"] != ""].groupby("node")["v"].sum(min_count=1)

    restarts = by_pod("kube_pod_container_status_restarts_total", lambda m: increase(m[W]))
    oom = by_pod("kube_pod_container_status_last_terminated_reason", wmax, {"reason": "OOMKilled"})
    has_restarts = "kube_pod_container_status_restarts_total" in data.tables
    has_reason = "kube_pod_container_status_last_terminated_reason" in data.tables
    alerts = None
    if "ALERTS" in data.tables:
        alerts = _per_node(data, "ALERTS", lambda m: (wmax(m) > 0).astype(np.float64), {"alertstate": "firing"}).clip(
            upper=1.0
        )
    out: dict[str, dict[str, float]] = {}
    for node in set(ready.index) | set(alloc.index) | set(gpu["node"]):
        out[node] = {
            "node_ready_min": float(ready.get(node, np.nan)),
            "node_allocatable_ratio": float(ratio(alloc.get(node, np.nan), cap.get(node, np.nan))),
            "pod_restarts_increase": float(restarts.get(node, 0.0 if has_restarts else np.nan)),
            "oom_killed": float(min(oom.get(node, 0.0 if has_reason else np.nan), 1.0)),
            "alerts_firing": np.nan if alerts is None else float(alerts.get(node, 0.0)),
        }
    return out


def queue_rows(data: WindowData, W: slice, P: slice) -> pd.DataFrame:
    def per_queue(name: str) -> tuple[pd.DataFrame, np.ndarray] | None:
        t = data.tables.get(name)
        if t is None:
            return None
        keep = np.ones(len(t.labels), dtype=bool)
        if "resource" in t.labels.columns:
            keep &= col(t.labels, "resource") == "nvidia.com/gpu"
        queues = col(t.labels, "queue_name")[keep]
        return pd.DataFrame({"queue": queues}), t.values[:, keep]

    def stat(name: str, rows: slice, fn: Callable[..., np.ndarray]) -> pd.Series:
        got = per_queue(name)
        if got is None:
            return pd.Series(dtype=np.float64)
        q, m = got
        return pd.Series(fn(m[rows], axis=0), index=q["queue"]).groupby(level=0).sum(min_count=1)

    def qmin(name: str, rows: slice) -> pd.Series:
        return stat(name, rows, lambda m, axis: quiet(np.nanmin, m, axis=axis))

    def qmax(name: str, rows: slice) -> pd.Series:
        return stat(name, rows, lambda m, axis: quiet(np.nanmax, m, axis=axis))

    def qmed(name: str, rows: slice) -> pd.Series:
        return stat(name, rows, lambda m, axis: quiet(np.nanmedian, m, axis=axis))

    cap = "volcano_queue_capacity_scalar_resources"
    des = "volcano_queue_deserved_scalar_resources"
    pend = "volcano_queue_pod_group_pending_count"
    req, alloc = "volcano_queue_request_scalar_resources", "volcano_queue_allocated_scalar_resources"
    cap_w, cap_p, des_w, des_p = qmin(cap, W), qmax(cap, P), qmin(des, W), qmax(des, P)
    pend_w, pend_p = qmax(pend, W), qmed(pend, P)
    req_w, alloc_w, alloc_p = qmed(req, W), qmed(alloc, W), qmed(alloc, P)
    queues = sorted(set(cap_w.index) | set(des_w.index) | set(alloc_w.index) | set(pend_w.index))
    rows = []
    for q in queues:

        def get(s: pd.Series, q: str = q) -> float:
            return float(s.get(q, np.nan))

        used = max((v for v in (get(alloc_p), get(alloc_w)) if np.isfinite(v)), default=np.nan)
        rows.append(
            {
                "queue": q,
                "is_queue": 1.0,
                "queue_capability_ratio": float(ratio(get(cap_w), get(cap_p))),
                "queue_capability_vs_use": float(ratio(get(cap_w), used)),
                "queue_capability_zero": float(get(cap_w) == 0) if np.isfinite(get(cap_w)) else np.nan,
                "queue_deserved_ratio": float(ratio(get(des_w), get(des_p))),
                "queue_pending_ratio": (get(pend_w) + 1) / (get(pend_p) + 1),
                "queue_unmet_frac": float(np.clip(ratio(get(req_w) - get(alloc_w), get(req_w)), 0, 1)),
                "queue_alloc_ratio": float(ratio(get(alloc_w), get(alloc_p))),
            }
        )
    return pd.DataFrame(rows)
