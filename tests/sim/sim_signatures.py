"""Checks that each injected fault shows up in the series it should (shared by Parquet and Prometheus tests).

``get(metric, labels, start, end)`` returns a long frame (``timestamp, value`` + labels) of that metric's
samples with exactly these label values, from whichever store the test reads.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd

Getter = Callable[[str, dict[str, str], pd.Timestamp, pd.Timestamp], pd.DataFrame]


def _rate(frame: pd.DataFrame) -> float:
    """Mean per-second increase over the samples (a counter's rate)."""
    if len(frame) < 2:
        return float("nan")
    frame = frame.sort_values("timestamp")
    dt = (frame["timestamp"].iloc[-1] - frame["timestamp"].iloc[0]).total_seconds()
    return float(frame["value"].iloc[-1] - frame["value"].iloc[0]) / dt


def check_fault(fault: pd.Series, get: Getter, step: pd.Timedelta) -> tuple[bool, str]:
    """(visible?, what was measured) for one row of the faults table."""
    start, end = fault["start"] + step, fault["end"] - step
    before_start, before_end = fault["start"] - 13 * step, fault["start"] - step
    node, gpu, cause = fault["node"], fault["gpu"], fault["cause"]
    gpu_labels = {"Hostname": node, "gpu": gpu}
    if cause == "gpu_thermal":
        temp = get("DCGM_FI_DEV_GPU_TEMP", gpu_labels, start, end)["value"]
        return bool(len(temp) and temp.median() >= 85), f"median temp {temp.median()}"
    if cause == "gpu_power_cap":
        reasons = get("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", gpu_labels, start, end)["value"]
        return bool(len(reasons) and (reasons == 4).all()), f"throttle reasons {set(reasons)}"
    if cause == "gpu_hardware":
        xid = get("DCGM_FI_DEV_XID_ERRORS", gpu_labels, start, end)["value"]
        return bool(len(xid) and (xid == fault["xid"]).all()), f"xid {set(xid)} want {fault['xid']}"
    if cause == "nvlink":
        crc = get("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", gpu_labels, start, end)
        crc_rate = sum(_rate(g) for _, g in crc.groupby("pod")) if len(crc) else float("nan")
        return bool(crc_rate > 1), f"crc errors/s {crc_rate}"
    if cause == "gpu_oom":
        reason = get(
            "kube_pod_container_status_last_terminated_reason",
            {"reason": "Error"},
            fault["start"],
            fault["end"] + 10 * step,
        )
        pods = set(reason["pod"]) if len(reason) else set()
        fb = get("DCGM_FI_DEV_FB_USED", {"Hostname": node, "gpu": gpu}, fault["start"], fault["end"])["value"]
        crashed = any(p.startswith(f"job-{fault['job_id']}-worker-") for p in pods)
        return bool(crashed and len(fb) and fb.max() > 75_000), f"crashed pods {pods}, FB max {fb.max()}"
    if cause == "scheduling_starvation":
        cap = get("volcano_queue_capacity_scalar_resources", {"queue_name": fault["queue"]}, start, end)["value"]
        return bool(len(cap) and (cap == 0).all()), f"capability {set(cap)}"
    if cause == "node_not_ready":
        ready = get("kube_node_status_condition", {"node": node, "condition": "Ready", "status": "true"}, start, end)[
            "value"
        ]
        util = get("DCGM_FI_DEV_GPU_UTIL", {"Hostname": node}, start + 5 * step, end)
        fresh = util[util["timestamp"] >= start + 5 * step] if len(util) else util
        return bool(len(ready) and (ready == 0).all()), f"ready {set(ready)}, fresh util samples {len(fresh)}"
    nodes = fault["nodes"].split(",")
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN list is reported below, not warned
        return _host_fault(cause, nodes, get, start, end, before_start, before_end)


def _host_fault(
    cause: str,
    nodes: list[str],
    get: Getter,
    start: pd.Timestamp,
    end: pd.Timestamp,
    before_start: pd.Timestamp,
    before_end: pd.Timestamp,
) -> tuple[bool, str]:
    if cause == "network_congestion":
        during = [_rate(get("node_netstat_Tcp_RetransSegs", {"node": n}, start, end)) for n in nodes]
        before = [_rate(get("node_netstat_Tcp_RetransSegs", {"node": n}, before_start, before_end)) for n in nodes]
        return bool(np.nanmax(during) > 5 * max(np.nanmax(before), 1)), f"retrans/s {during} vs {before}"
    if cause == "io_stall":
        during = [_rate(get("node_cpu_seconds_total", {"node": n, "mode": "iowait"}, start, end)) for n in nodes]
        return bool(np.nanmin(during) > 0.25), f"iowait {during}"
    if cause == "cpu_contention":
        load = [get("node_load1", {"node": n}, start, end)["value"].median() for n in nodes]
        return bool(np.nanmin(load) > 96), f"load1 {load}"
    if cause in ("roce_pfc_storm", "roce_congestion"):
        metric = "node_ethtool_rx_prio3_pause" if cause == "roce_pfc_storm" else "node_ethtool_np_cnp_sent"
        during = [_rate(get(metric, {"node": n}, start, end)) for n in nodes]
        before = [_rate(get(metric, {"node": n}, before_start, before_end)) for n in nodes]
        return bool(np.nanmax(during) > 10 * max(np.nanmax(before), 1)), f"{metric}/s {during} vs {before}"
    if cause == "nic_link_flap":
        flaps = [_rate(get("node_network_carrier_changes_total", {"node": n}, start, end)) for n in nodes]
        return bool(np.nanmax(flaps) > 0), f"carrier changes/s {flaps}"
    raise AssertionError(f"unknown cause {cause}")


def overlaps_node_outage(fault: pd.Series, faults: pd.DataFrame) -> bool:
    """A job fault whose node went down meanwhile is not visible (the job was killed): skip it."""
    down = faults[faults["cause"] == "node_not_ready"]
    nodes = set(str(fault["nodes"]).split(",")) | {fault["node"]}
    clash = down[down["node"].isin(nodes) & (down["start"] < fault["end"]) & (down["end"] > fault["start"])]
    return fault["cause"] != "node_not_ready" and not clash.empty
