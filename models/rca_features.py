"""Symptom features of one time window, from long history frames of standard series only.

Why pure and in ``models``: the simulator's frames (training), a ``--history`` file and a Prometheus answer
(diagnosis) must become *identical* features, and that is only testable if the code does no I/O. A
missing series is a feature value (NaN, which the tree routes like any other value), never a crash.

One row per *candidate scope*: every node seen in the window (GPU, host and Kubernetes symptoms, plus
the context of the job that holds most of its GPUs) and every Volcano queue (quota and pending work).
``models.rca_specs.SPECS`` is the feature table; ``predictor/diagnose/FEATURES.md`` is generated from it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

import numpy as np
import pandas as pd

from models.rca_context import host_features, kube_features, queue_rows
from models.rca_specs import (
    ABSENT,
    FEATURE_NAMES,
    NOT_APPLICABLE,
    POD_LABELS,
    QUEUE_FEATURES,
    SCRAPE_HEALTH,
    SPECS,
    FeatureSpec,
    feature_table_markdown,
)
from models.rca_window import GPU_PREFIX, WindowData, col, increase, node_of, quiet, rate, ratio, sratio

__all__ = [
    "ABSENT",
    "DERIVED",
    "FEATURE_NAMES",
    "NOT_APPLICABLE",
    "SCOPE_COLUMNS",
    "SPECS",
    "FeatureSpec",
    "WindowData",
    "feature_table_markdown",
    "mark_not_applicable",
    "node_of",
    "queue_not_applicable",
    "window_features",
    "with_derived",
]


# Which GPU to name for a GPU-level cause (argmax of the feature that points at it), kept beside features.
SCOPE_COLUMNS = ("node", "gpu_hot", "gpu_slow", "gpu_xid", "gpu_crc", "gpu_fb", "job", "gpu_jobs", "queue")

_GPU = GPU_PREFIX
NVLINK_XID = 74  # "NVLink error": an NVLink fault, not a failing GPU
_POD_SUFFIX = re.compile(r"(-(worker|master|launcher|ps|chief|task))?-\d+$")


def window_features(data: WindowData, at: pd.Timestamp, window: pd.Timedelta) -> pd.DataFrame:
    """One row per candidate (node or queue) for the window ``(at - window, at]``; NaN = not measured."""
    t1 = pd.Timestamp(at).value
    w = pd.Timedelta(window).value
    W, P, WP = data.rows(t1 - w, t1), data.rows(t1 - 2 * w, t1 - w), data.rows(t1 - 2 * w, t1)
    seconds = w / 1e9
    frames = [_node_rows(data, W, P, WP, seconds), queue_rows(data, W, P)]
    out = (
        pd.concat([f for f in frames if not f.empty], ignore_index=True)
        if any(not f.empty for f in frames)
        else pd.DataFrame(columns=[*SCOPE_COLUMNS, *FEATURE_NAMES])
    )
    for c in FEATURE_NAMES:
        if c not in out.columns:
            out[c] = np.nan
    for c in SCOPE_COLUMNS:
        if c not in out.columns:
            out[c] = ""
    out[list(FEATURE_NAMES)] = out[list(FEATURE_NAMES)].astype(np.float64)
    out[list(SCOPE_COLUMNS)] = out[list(SCOPE_COLUMNS)].fillna("").astype(str)
    rows = mark_not_applicable(_mark_absent(out[[*SCOPE_COLUMNS, *FEATURE_NAMES]], data, W, P))
    absent = frozenset(f for spec in SPECS for f in spec.families if f not in data.tables)
    return with_derived(queue_not_applicable(rows, [absent] * len(rows)))


def queue_not_applicable(rows: pd.DataFrame, missing: Sequence[Collection[str]]) -> pd.DataFrame:
    """Queue features of queue rows still NaN although none of the families they read is in the row's
    ``missing`` → ``NOT_APPLICABLE``.

    Why: such a NaN is a ratio with nothing to divide by (a queue with no capability, allocation or request
    in the preceding window: a starved queue), which was measured. Left NaN, the tree averages over it as
    unknown and a starved queue reads ``insufficient_data``. A family that is missing keeps its NaN."""
    out = rows.copy()
    queue = out["is_queue"].to_numpy() == 1
    for spec in SPECS:
        if spec.name not in QUEUE_FEATURES:
            continue
        scraped = np.array([not set(spec.families) & set(m) for m in missing], dtype=bool)
        fill = queue & scraped & np.isnan(out[spec.name].to_numpy(dtype=np.float64))
        out.loc[fill, spec.name] = NOT_APPLICABLE
    return out


# Features computed from other features' values (after those are marked NOT_APPLICABLE or ABSENT), so
# labelled windows cached before one was added get it exactly as a fresh window would.
DERIVED = {"net_rx_vs_util": ("net_rx_ratio", "gpu_util_ratio")}


def with_derived(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with every ``DERIVED`` feature (a ratio of two features) filled in; idempotent.

    A sentinel in either input is passed on (ABSENT before NOT_APPLICABLE); NaN in either stays NaN."""
    out = rows.copy()
    for name, (a, b) in DERIVED.items():
        x, y = out[a].to_numpy(dtype=np.float64), out[b].to_numpy(dtype=np.float64)
        value = np.asarray(ratio(x, y), dtype=np.float64)
        for sentinel in (NOT_APPLICABLE, ABSENT):  # ABSENT last: it wins over NOT_APPLICABLE
            value = np.where((x == sentinel) | (y == sentinel), sentinel, value)
        value = np.where(np.isfinite(y) & (y == 0), NOT_APPLICABLE, value)  # nothing before: no ratio
        out[name] = np.where(np.isnan(x) | np.isnan(y), np.nan, value)
    return out


def _mark_absent(rows: pd.DataFrame, data: WindowData, W: slice, P: slice) -> pd.DataFrame:
    """NaN features of a node whose own scrape of a family stopped → ``ABSENT`` (evidence, not unknown).

    A family missing cluster-wide stays NaN (the tree averages over it). But a node that reported a family
    in the preceding window, or that Kubernetes marks not Ready, or whose scrape target reads ``up == 0``,
    and has no sample of it in this window
    while the family is scraped elsewhere, is a node that went dark: the absence of its exporters is what
    a down node looks like on a real cluster, and the tree must be able to read it as such.
    """
    is_node = rows["is_queue"].to_numpy() != 1
    if not is_node.any():
        return rows
    nodes = rows["node"].to_numpy()
    not_ready = rows["node_ready_min"].to_numpy() < 1
    up = data.tables.get(SCRAPE_HEALTH)  # 0 = the target did not answer
    if up is not None:
        failed = quiet(np.nanmin, up.values[W], axis=0) < 1
        not_ready |= np.isin(nodes, list(set(node_of(up.labels)[failed])))
    out = rows.copy()
    has = {}  # family → which node rows have a sample of it in the window
    for family in _NODE_FAMILIES:
        t = data.tables.get(family)
        if t is None:
            continue
        owner = node_of(t.labels)
        seen_w = set(owner[np.isfinite(t.values[W]).any(axis=0)])
        has[family] = is_node & np.isin(nodes, list(seen_w))
        names = _FAMILY_FEATURES.get(family, ())
        if not seen_w or not names:
            continue  # nobody reports it in this window: unknown, not a sign of one node
        seen_p = set(owner[np.isfinite(t.values[P]).any(axis=0)])
        dark = is_node & ~has[family] & (np.isin(nodes, list(seen_p)) | not_ready)
        if dark.any():
            block = out.loc[dark, list(names)]
            out.loc[dark, list(names)] = block.where(block.notna(), ABSENT)
    # A feature still NaN although the node reports every family it reads does not apply here (no GPU was
    # busy before, a job on one GPU has no spread, no traffic to divide by): a value, not "unmeasured".
    # Left NaN, the tree would average over both branches and a quiet node could land in a fault's leaf.
    for spec in SPECS:
        if spec.name in QUEUE_FEATURES or not spec.families or any(f not in has for f in spec.families):
            continue
        applies = np.logical_and.reduce([has[f] for f in spec.families])
        col_ = out[spec.name].to_numpy()
        out.loc[applies & np.isnan(col_), spec.name] = NOT_APPLICABLE
    return out


_NODE_FAMILIES = sorted({f for s in SPECS if s.name not in QUEUE_FEATURES for f in s.families})
# Only families the node's own exporters serve (DCGM, node_exporter) can go dark with the node:
# kube-state-metrics and ALERTS series come from elsewhere, and an alert that stopped firing is not a
# node gone dark.
_FAMILY_FEATURES = {
    f: tuple(s.name for s in SPECS if f in s.families and s.name not in QUEUE_FEATURES)
    for f in _NODE_FAMILIES
    if f.startswith((_GPU, "node_"))
}


def mark_not_applicable(rows: pd.DataFrame) -> pd.DataFrame:
    """Queue features of node rows and node features of queue rows → ``NOT_APPLICABLE`` (idempotent).

    Why not NaN: NaN means "not measured" and the tree averages over both branches of a split on it; a
    GPU temperature of a Volcano queue is not unknown, it does not exist, and must route like a value.
    """
    out = rows.copy()
    queue = out["is_queue"].to_numpy() == 1
    for name in FEATURE_NAMES:
        if name == "is_queue":
            continue
        other = ~queue if name in QUEUE_FEATURES else queue
        out.loc[other, name] = NOT_APPLICABLE
    return out


def _job_of_pods(data: WindowData) -> dict[tuple[str, str], str]:
    t = data.tables.get(POD_LABELS)
    if t is None or "label_volcano_sh_job_name" not in t.labels.columns:
        return {}
    return dict(
        zip(
            zip(col(t.labels, "namespace"), col(t.labels, "pod"), strict=True),
            col(t.labels, "label_volcano_sh_job_name"),
            strict=True,
        )
    )


def _gpu_pods(data: WindowData, W: slice) -> pd.DataFrame:
    """Per GPU key, the (namespace, pod) holding it longest in the window (empty when idle)."""
    t = data.tables.get(f"{_GPU}GPU_UTIL")
    keys = data._gpu_keys
    out = keys.assign(namespace="", pod="")
    if t is None or keys.empty:
        return out
    lab = t.labels
    frame = pd.DataFrame(
        {
            "node": node_of(lab),
            "gpu": col(lab, "gpu"),
            "namespace": col(lab, "namespace"),
            "pod": col(lab, "pod"),
            "n": np.isfinite(t.values[W]).sum(axis=0),
        }
    )
    frame = frame[(frame["pod"] != "") & (frame["n"] > 0)].sort_values("n")
    frame = frame.drop_duplicates(["node", "gpu"], keep="last")
    merged = keys.merge(frame[["node", "gpu", "namespace", "pod"]], on=["node", "gpu"], how="left")
    return merged.fillna("")


def _node_rows(data: WindowData, W: slice, P: slice, WP: slice, seconds: float) -> pd.DataFrame:
    keys = data._gpu_keys
    host_nodes = set()
    for name in ("kube_node_status_condition", "node_load1", "node_cpu_seconds_total"):
        if name in data.tables:
            host_nodes |= set(node_of(data.tables[name].labels))
    nodes = sorted((set(keys["node"]) | host_nodes) - {""})
    if not nodes:
        return pd.DataFrame()
    gpu = keys.assign(**_gpu_features(data, W, P, WP, seconds))
    pods = _gpu_pods(data, W)
    jobs = _job_of_pods(data)
    gpu["job"] = [
        jobs.get((ns, p), _POD_SUFFIX.sub("", p)) if p else ""
        for ns, p in zip(pods["namespace"], pods["pod"], strict=True)
    ]
    gpu["namespace"], gpu["pod"] = pods["namespace"], pods["pod"]
    out = pd.DataFrame({"node": nodes, "is_queue": 0.0})
    if len(gpu):
        out = out.merge(_gpu_aggregates(gpu, W.stop - W.start), on="node", how="left")
    for source in (host_features(data, W, P, seconds), kube_features(data, W, gpu)):
        if source:
            out = out.merge(
                pd.DataFrame.from_dict(source, orient="index").rename_axis("node").reset_index(), on="node", how="left"
            )
    return out


def _gpu_features(data: WindowData, W: slice, P: slice, WP: slice, seconds: float) -> dict[str, np.ndarray]:
    mat = data.gpu_matrix
    util_w, util_p = mat(f"{_GPU}GPU_UTIL", W, True), mat(f"{_GPU}GPU_UTIL", P, True)
    util_wp = mat(f"{_GPU}GPU_UTIL", WP, True)
    uw, up = quiet(np.nanmean, util_w, axis=0), quiet(np.nanmean, util_p, axis=0)
    temp_w, temp_p = mat(f"{_GPU}GPU_TEMP", W), mat(f"{_GPU}GPU_TEMP", P)
    # Clocks only where the GPU is working: an idle GPU parks at its idle clock, which is no symptom.
    clock_w = np.where(util_w > 5, mat(f"{_GPU}SM_CLOCK", W), np.nan)
    clock_wp = np.where(util_wp > 5, mat(f"{_GPU}SM_CLOCK", WP), np.nan)
    power_w, power_p = mat(f"{_GPU}POWER_USAGE", W), mat(f"{_GPU}POWER_USAGE", P)
    thr = mat(f"{_GPU}CLOCK_THROTTLE_REASONS", W)
    present = np.isfinite(thr)
    thr_i = np.where(present, thr, 0).astype(np.int64)
    n_thr = np.where(present.sum(axis=0) > 0, present.sum(axis=0), np.nan)
    fb_used, fb_free = mat(f"{_GPU}FB_USED", W), mat(f"{_GPU}FB_FREE", W)
    nvl_w, nvl_p = mat(f"{_GPU}NVLINK_BANDWIDTH_TOTAL", W), mat(f"{_GPU}NVLINK_BANDWIDTH_TOTAL", P)
    busy_before = up > 20
    xid = mat(f"{_GPU}XID_ERRORS", W)
    return {
        "temp_p95": quiet(np.nanpercentile, temp_w, 95, axis=0),
        "temp_delta": quiet(np.nanmedian, temp_w, axis=0) - quiet(np.nanmedian, temp_p, axis=0),
        "clock_med": quiet(np.nanmedian, clock_w, axis=0),
        "clock_ref": quiet(np.nanpercentile, clock_wp, 90, axis=0),
        "power_drop": 1 - ratio(quiet(np.nanmedian, power_w, axis=0), quiet(np.nanmedian, power_p, axis=0)),
        "thr_power": ((thr_i & 4) > 0).sum(axis=0) / n_thr,
        "thr_thermal": ((thr_i & (8 | 32 | 64)) > 0).sum(axis=0) / n_thr,
        "xid": quiet(np.nanmax, np.where(xid == NVLINK_XID, 0, xid), axis=0),
        "xid_nvlink": np.where(np.isfinite(xid).any(axis=0), (xid == NVLINK_XID).any(axis=0), np.nan),
        "nvl_replay": rate(mat(f"{_GPU}NVLINK_REPLAY_ERROR_COUNT_TOTAL", W), seconds)
        + rate(mat(f"{_GPU}NVLINK_RECOVERY_ERROR_COUNT_TOTAL", W), seconds),
        "ecc": increase(mat(f"{_GPU}ECC_DBE_VOL_TOTAL", W)),
        "crc": rate(mat(f"{_GPU}NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", W), seconds),
        "nvl_w": rate(nvl_w, seconds),
        "nvl_p": rate(nvl_p, seconds),
        "fb": quiet(np.nanmax, ratio(fb_used, fb_used + fb_free), axis=0),
        "util_w": uw,
        "util_p": up,
        "util_n": np.isfinite(util_w).sum(axis=0).astype(np.float64),
        "util_ratio": np.where(busy_before, ratio(uw, up), np.nan),
        "util_cv": np.where(uw > 5, ratio(quiet(np.nanstd, util_w, axis=0), uw), np.nan),
        "util_low": np.where(
            busy_before, quiet(np.nanmean, np.where(np.isfinite(util_w), util_w < 3, np.nan), axis=0), np.nan
        ),
    }


def _gpu_aggregates(gpu: pd.DataFrame, n_rows: int) -> pd.DataFrame:
    """Per node: worst-GPU aggregates, which GPU is worst for each symptom, and the main job's context."""
    ref = gpu.groupby("node")["clock_ref"].transform("max")
    gpu = gpu.assign(
        drop=np.where(ref > 0, 1 - gpu["clock_med"] / ref, np.nan),
        busy_temp=np.where(gpu["util_w"] > 5, gpu["temp_p95"], np.nan),
        neg_ratio=-gpu["util_ratio"],
        busy_w=np.where(gpu["util_w"] > 5, gpu["util_w"], np.nan),
        before_w=np.where(gpu["util_p"] > 20, gpu["util_w"], np.nan),
        before_p=np.where(gpu["util_p"] > 20, gpu["util_p"], np.nan),
    )
    g = gpu.groupby("node")
    out = pd.DataFrame(
        {
            "gpu_temp_p95_max": g["temp_p95"].max(),
            "gpu_temp_delta_max": g["temp_delta"].max(),
            "gpu_temp_over_peers": (g["busy_temp"].max() - g["busy_temp"].median()).where(g["busy_temp"].count() > 1),
            "sm_clock_drop_max": g["drop"].max(),
            "gpu_power_drop_max": g["power_drop"].max(),
            "throttle_power_frac_max": g["thr_power"].max(),
            "throttle_thermal_frac_max": g["thr_thermal"].max(),
            "xid_max": g["xid"].max(),
            "ecc_dbe_increase": g["ecc"].sum(min_count=1),
            "nvlink_crc_rate_max": g["crc"].max(),
            "xid_nvlink": g["xid_nvlink"].max(),
            "nvlink_replay_rate_max": g["nvl_replay"].max(),
            "nvlink_bw_ratio": sratio(g["nvl_w"].sum(min_count=1), g["nvl_p"].sum(min_count=1)),
            "fb_used_frac_max": g["fb"].max(),
            "gpu_util_mean": g["busy_w"].mean(),
            "gpu_util_ratio": sratio(g["before_w"].sum(min_count=1), g["before_p"].sum(min_count=1)),
            "gpu_util_ratio_min": -g["neg_ratio"].max(),
            "gpu_util_cv_mean": g["util_cv"].mean(),
            "gpu_util_low_frac_max": g["util_low"].max(),
            "dcgm_coverage": g["util_n"].sum() / (g["util_n"].count().clip(lower=1) * max(n_rows, 1)),
        }
    )
    for name, src in (
        ("gpu_hot", "temp_p95"),
        ("gpu_slow", "drop"),
        ("gpu_xid", "xid"),
        ("gpu_crc", "crc"),
        ("gpu_fb", "fb"),
    ):
        valid = gpu[np.isfinite(gpu[src].to_numpy(dtype=np.float64))]
        top = valid.loc[valid.groupby("node")[src].idxmax()] if len(valid) else valid
        out[name] = top.set_index("node")["gpu"] if len(top) else ""
    held = gpu[gpu["job"] != ""]
    main = held.groupby(["node", "job"]).size().reset_index(name="n").sort_values(["node", "n", "job"])
    out["job"] = main.drop_duplicates("node", keep="last").set_index("node")["job"]
    # "gpu:job" pairs, so a GPU-level finding names the job on *that* GPU, not the node's main job.
    pairs = held.assign(pair=held["gpu"].astype(str) + ":" + held["job"]).groupby("node")["pair"]
    out["gpu_jobs"] = pairs.agg(",".join)
    jg = held.groupby("job")
    before = held[held["util_p"] > 20].groupby("job")
    ctx = pd.DataFrame(
        {
            "job_multi_node": (jg["node"].nunique() > 1).astype(np.float64),
            "job_util_ratio": sratio(before["util_w"].sum(), before["util_p"].sum()),
            "job_util_ratio_spread": before["util_ratio"].std(ddof=0).where(before["util_ratio"].count() > 1),
        }
    )
    out = out.reset_index().rename(columns={"index": "node"})
    return out.merge(ctx, left_on="job", right_index=True, how="left")
