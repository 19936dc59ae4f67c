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
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from models.frames import ID, TIME, VALUE
from models.rca_specs import FEATURE_NAMES, SPECS, FeatureSpec, feature_table_markdown

__all__ = ["FEATURE_NAMES", "SCOPE_COLUMNS", "SPECS", "FeatureSpec", "WindowData", "feature_table_markdown",
           "window_features"]


# Which GPU to name for a GPU-level cause (argmax of the feature that points at it), kept beside features.
SCOPE_COLUMNS = ("node", "gpu_hot", "gpu_slow", "gpu_xid", "gpu_crc", "gpu_fb", "job", "gpu_jobs", "queue")

_NODE_LABELS = ("Hostname", "hostname", "node", "kubernetes_node", "instance")
_GPU = "DCGM_FI_DEV_"
_POD_SUFFIX = re.compile(r"(-(worker|master|launcher|ps|chief|task))?-\d+$")


def _quiet(fn: Callable[..., np.ndarray], *args: object, **kwargs: object) -> np.ndarray:
    # All-NaN slices are normal here (a missing series); their NaN result is the feature value.
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.asarray(fn(*args, **kwargs), dtype=np.float64)


def _node_of(labels: pd.DataFrame) -> np.ndarray:
    out = np.full(len(labels), "", dtype=object)
    for name in reversed(_NODE_LABELS):  # first label in the list wins
        if name in labels.columns:
            col = labels[name].fillna("").astype(str).to_numpy()
            if name == "instance":
                col = np.array([c.rsplit(":", 1)[0] for c in col], dtype=object)
            out = np.where(col != "", col, out)
    return out


def _col(labels: pd.DataFrame, name: str) -> np.ndarray:
    if name not in labels.columns:
        return np.full(len(labels), "", dtype=object)
    return labels[name].fillna("").astype(str).to_numpy()


@dataclass
class _Table:
    values: np.ndarray  # [T, S]
    labels: pd.DataFrame  # one row per series, positional


class WindowData:
    """A long frame of many metrics, pivoted once to ``[time, series]`` matrices on one time axis."""

    def __init__(self, frame: pd.DataFrame | None = None) -> None:
        self.times = np.zeros(0, dtype=np.int64)
        self.tables: dict[str, _Table] = {}
        self._gpu_cache: dict[str, np.ndarray] = {}
        if frame is None:
            return
        names = frame["__name__"].astype(str) if "__name__" in frame.columns else \
            frame[ID].astype(str).str.replace(r"\{.*$", "", regex=True)
        stamps = pd.DatetimeIndex(pd.to_datetime(frame[TIME], utc=True)).as_unit("ns").asi8
        self.times, t_index = np.unique(stamps, return_inverse=True)
        label_cols = [c for c in frame.columns if c not in (ID, TIME, VALUE, "__name__")]
        values = frame[VALUE].to_numpy(dtype=np.float64)
        ids = frame[ID].astype(str).to_numpy()
        for name, idx in names.groupby(names.to_numpy(), sort=False).indices.items():
            codes, uniques = pd.factorize(ids[idx])
            m = np.full((len(self.times), len(uniques)), np.nan)
            m[t_index[idx], codes] = values[idx]
            first = np.unique(codes, return_index=True)[1]
            labels = pd.DataFrame(frame[label_cols].iloc[idx[first]]).reset_index(drop=True)
            labels = labels.dropna(axis=1, how="all")
            self.tables[str(name)] = _Table(m, labels)
        self._gpu_keys = self._build_gpu_keys()

    @classmethod
    def from_matrices(cls, times_ns: np.ndarray, tables: dict[str, tuple[np.ndarray, pd.DataFrame]]) -> WindowData:
        """Built directly from ``{metric: ([time, series] values, labels per series)}`` (no long frame)."""
        data = cls()
        data.times = np.asarray(times_ns, dtype=np.int64)
        data.tables = {k: _Table(v, lab.reset_index(drop=True)) for k, (v, lab) in tables.items()}
        data._gpu_keys = data._build_gpu_keys()
        return data

    def _build_gpu_keys(self) -> pd.DataFrame:
        keys = set()
        for name, t in self.tables.items():
            if name.startswith(_GPU) or name.startswith("DCGM_FI_PROF_"):
                keys |= set(zip(_node_of(t.labels), _col(t.labels, "gpu"), strict=True))
        return pd.DataFrame(sorted(keys), columns=["node", "gpu"])

    def rows(self, t0: int, t1: int) -> slice:
        """Row slice of samples in ``(t0, t1]`` (ns)."""
        return slice(int(np.searchsorted(self.times, t0, "right")), int(np.searchsorted(self.times, t1, "right")))

    def gpu_matrix(self, name: str, rows: slice, held_only: bool = False) -> np.ndarray:
        """``[T, G]`` of a DCGM family over the GPU keys; series of one GPU (pod changes) merged by max.

        ``held_only`` keeps only series with a non-empty ``pod`` label (when the label exists), so a GPU
        whose job ended reads "not measured" instead of "utilisation fell to zero".
        """
        key = f"{name}/held" if held_only else name
        if key not in self._gpu_cache:
            keys = self._gpu_keys
            out = np.full((len(self.times), len(keys)), np.nan)
            t = self.tables.get(name)
            if t is not None and not keys.empty:
                index = pd.MultiIndex.from_frame(keys)
                pos = index.get_indexer(pd.MultiIndex.from_arrays([_node_of(t.labels), _col(t.labels, "gpu")]))
                if held_only and "pod" in t.labels.columns:
                    pos = np.where(_col(t.labels, "pod") != "", pos, -1)
                for s in np.flatnonzero(pos >= 0):
                    out[:, pos[s]] = np.fmax(out[:, pos[s]], t.values[:, s])
            self._gpu_cache[key] = out
        return self._gpu_cache[key][rows]


def _increase(m: np.ndarray) -> np.ndarray:
    """Counter increase per column over its samples, counting resets as Prometheus does."""
    d = np.diff(m, axis=0)
    after = m[1:]
    inc = np.where(d >= 0, d, after)  # a drop is a reset: the new value is what was counted since
    return _quiet(np.nansum, inc, axis=0) * np.where(np.isfinite(m).sum(axis=0) >= 2, 1.0, np.nan)


def _rate(m: np.ndarray, seconds: float) -> np.ndarray:
    return _increase(m) / max(seconds, 1.0)


def _ratio(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.where(np.asarray(b) > 0, np.asarray(a, dtype=np.float64) / np.asarray(b, dtype=np.float64), np.nan)


def _sratio(a: pd.Series, b: pd.Series) -> pd.Series:
    return (a / b.where(b > 0)).astype(np.float64)


def window_features(data: WindowData, at: pd.Timestamp, window: pd.Timedelta) -> pd.DataFrame:
    """One row per candidate (node or queue) for the window ``(at - window, at]``; NaN = not measured."""
    t1 = pd.Timestamp(at).value
    w = pd.Timedelta(window).value
    W, P, WP = data.rows(t1 - w, t1), data.rows(t1 - 2 * w, t1 - w), data.rows(t1 - 2 * w, t1)
    seconds = w / 1e9
    frames = [_node_rows(data, W, P, WP, seconds), _queue_rows(data, W, P)]
    out = pd.concat([f for f in frames if not f.empty], ignore_index=True) if any(
        not f.empty for f in frames) else pd.DataFrame(columns=[*SCOPE_COLUMNS, *FEATURE_NAMES])
    for c in FEATURE_NAMES:
        if c not in out.columns:
            out[c] = np.nan
    for c in SCOPE_COLUMNS:
        if c not in out.columns:
            out[c] = ""
    out[list(FEATURE_NAMES)] = out[list(FEATURE_NAMES)].astype(np.float64)
    out[list(SCOPE_COLUMNS)] = out[list(SCOPE_COLUMNS)].fillna("").astype(str)
    return out[[*SCOPE_COLUMNS, *FEATURE_NAMES]]


def _job_of_pods(data: WindowData) -> dict[tuple[str, str], str]:
    t = data.tables.get("kube_pod_labels")
    if t is None or "label_volcano_sh_job_name" not in t.labels.columns:
        return {}
    return dict(zip(zip(_col(t.labels, "namespace"), _col(t.labels, "pod"), strict=True),
                    _col(t.labels, "label_volcano_sh_job_name"), strict=True))


def _gpu_pods(data: WindowData, W: slice) -> pd.DataFrame:
    """Per GPU key, the (namespace, pod) holding it longest in the window (empty when idle)."""
    t = data.tables.get(f"{_GPU}GPU_UTIL")
    keys = data._gpu_keys
    out = keys.assign(namespace="", pod="")
    if t is None or keys.empty:
        return out
    lab = t.labels
    frame = pd.DataFrame({"node": _node_of(lab), "gpu": _col(lab, "gpu"), "namespace": _col(lab, "namespace"),
                          "pod": _col(lab, "pod"), "n": np.isfinite(t.values[W]).sum(axis=0)})
    frame = frame[(frame["pod"] != "") & (frame["n"] > 0)].sort_values("n")
    frame = frame.drop_duplicates(["node", "gpu"], keep="last")
    merged = keys.merge(frame[["node", "gpu", "namespace", "pod"]], on=["node", "gpu"], how="left")
    return merged.fillna("")


def _node_rows(data: WindowData, W: slice, P: slice, WP: slice, seconds: float) -> pd.DataFrame:
    keys = data._gpu_keys
    host_nodes = set()
    for name in ("kube_node_status_condition", "node_load1", "node_cpu_seconds_total"):
        if name in data.tables:
            host_nodes |= set(_node_of(data.tables[name].labels))
    nodes = sorted((set(keys["node"]) | host_nodes) - {""})
    if not nodes:
        return pd.DataFrame()
    gpu = keys.assign(**_gpu_features(data, W, P, WP, seconds))
    pods = _gpu_pods(data, W)
    jobs = _job_of_pods(data)
    gpu["job"] = [jobs.get((ns, p), _POD_SUFFIX.sub("", p)) if p else "" for ns, p in
                  zip(pods["namespace"], pods["pod"], strict=True)]
    gpu["namespace"], gpu["pod"] = pods["namespace"], pods["pod"]
    out = pd.DataFrame({"node": nodes, "is_queue": 0.0})
    if len(gpu):
        out = out.merge(_gpu_aggregates(gpu, W.stop - W.start), on="node", how="left")
    for source in (_host_features(data, W, P, seconds), _kube_features(data, W, gpu)):
        if source:
            out = out.merge(pd.DataFrame.from_dict(source, orient="index").rename_axis("node").reset_index(),
                            on="node", how="left")
    return out


def _gpu_features(data: WindowData, W: slice, P: slice, WP: slice, seconds: float) -> dict[str, np.ndarray]:
    mat = data.gpu_matrix
    util_w, util_p = mat(f"{_GPU}GPU_UTIL", W, True), mat(f"{_GPU}GPU_UTIL", P, True)
    util_wp = mat(f"{_GPU}GPU_UTIL", WP, True)
    uw, up = _quiet(np.nanmean, util_w, axis=0), _quiet(np.nanmean, util_p, axis=0)
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
    return {
        "temp_p95": _quiet(np.nanpercentile, temp_w, 95, axis=0),
        "temp_delta": _quiet(np.nanmedian, temp_w, axis=0) - _quiet(np.nanmedian, temp_p, axis=0),
        "clock_med": _quiet(np.nanmedian, clock_w, axis=0),
        "clock_ref": _quiet(np.nanpercentile, clock_wp, 90, axis=0),
        "power_drop": 1 - _ratio(_quiet(np.nanmedian, power_w, axis=0), _quiet(np.nanmedian, power_p, axis=0)),
        "thr_power": ((thr_i & 4) > 0).sum(axis=0) / n_thr,
        "thr_thermal": ((thr_i & (8 | 32 | 64)) > 0).sum(axis=0) / n_thr,
        "xid": _quiet(np.nanmax, mat(f"{_GPU}XID_ERRORS", W), axis=0),
        "ecc": _increase(mat(f"{_GPU}ECC_DBE_VOL_TOTAL", W)),
        "crc": _rate(mat(f"{_GPU}NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", W), seconds),
        "nvl_w": _rate(nvl_w, seconds), "nvl_p": _rate(nvl_p, seconds),
        "fb": _quiet(np.nanmax, _ratio(fb_used, fb_used + fb_free), axis=0),
        "util_w": uw, "util_p": up, "util_n": np.isfinite(util_w).sum(axis=0).astype(np.float64),
        "util_ratio": np.where(busy_before, _ratio(uw, up), np.nan),
        "util_cv": np.where(uw > 5, _ratio(_quiet(np.nanstd, util_w, axis=0), uw), np.nan),
        "util_low": np.where(busy_before, _quiet(np.nanmean, np.where(np.isfinite(util_w), util_w < 3, np.nan),
                                                 axis=0), np.nan),
    }


def _gpu_aggregates(gpu: pd.DataFrame, n_rows: int) -> pd.DataFrame:
    """Per node: worst-GPU aggregates, which GPU is worst for each symptom, and the main job's context."""
    ref = gpu.groupby("node")["clock_ref"].transform("max")
    gpu = gpu.assign(drop=np.where(ref > 0, 1 - gpu["clock_med"] / ref, np.nan),
                     neg_ratio=-gpu["util_ratio"], busy_w=np.where(gpu["util_w"] > 5, gpu["util_w"], np.nan),
                     before_w=np.where(gpu["util_p"] > 20, gpu["util_w"], np.nan),
                     before_p=np.where(gpu["util_p"] > 20, gpu["util_p"], np.nan))
    g = gpu.groupby("node")
    out = pd.DataFrame({
        "gpu_temp_p95_max": g["temp_p95"].max(), "gpu_temp_delta_max": g["temp_delta"].max(),
        "sm_clock_drop_max": g["drop"].max(), "gpu_power_drop_max": g["power_drop"].max(),
        "throttle_power_frac_max": g["thr_power"].max(), "throttle_thermal_frac_max": g["thr_thermal"].max(),
        "xid_max": g["xid"].max(), "ecc_dbe_increase": g["ecc"].sum(min_count=1),
        "nvlink_crc_rate_max": g["crc"].max(),
        "nvlink_bw_ratio": _sratio(g["nvl_w"].sum(min_count=1), g["nvl_p"].sum(min_count=1)),
        "fb_used_frac_max": g["fb"].max(), "gpu_util_mean": g["busy_w"].mean(),
        "gpu_util_ratio": _sratio(g["before_w"].sum(min_count=1), g["before_p"].sum(min_count=1)),
        "gpu_util_ratio_min": -g["neg_ratio"].max(), "gpu_util_cv_mean": g["util_cv"].mean(),
        "gpu_util_low_frac_max": g["util_low"].max(),
        "dcgm_coverage": g["util_n"].sum() / (g["util_n"].count().clip(lower=1) * max(n_rows, 1)),
    })
    for col, src in (("gpu_hot", "temp_p95"), ("gpu_slow", "drop"), ("gpu_xid", "xid"), ("gpu_crc", "crc"),
                     ("gpu_fb", "fb")):
        valid = gpu[np.isfinite(gpu[src].to_numpy(dtype=np.float64))]
        top = valid.loc[valid.groupby("node")[src].idxmax()] if len(valid) else valid
        out[col] = top.set_index("node")["gpu"] if len(top) else ""
    held = gpu[gpu["job"] != ""]
    main = held.groupby(["node", "job"]).size().reset_index(name="n").sort_values(["node", "n", "job"])
    out["job"] = main.drop_duplicates("node", keep="last").set_index("node")["job"]
    # "gpu:job" pairs, so a GPU-level finding names the job on *that* GPU, not the node's main job.
    pairs = held.assign(pair=held["gpu"].astype(str) + ":" + held["job"]).groupby("node")["pair"]
    out["gpu_jobs"] = pairs.agg(",".join)
    jg = held.groupby("job")
    before = held[held["util_p"] > 20].groupby("job")
    ctx = pd.DataFrame({
        "job_nodes": jg["node"].nunique().astype(np.float64),
        "job_util_ratio": _sratio(before["util_w"].sum(), before["util_p"].sum()),
        "job_util_ratio_spread": before["util_ratio"].std(ddof=0).where(before["util_ratio"].count() > 1),
    })
    out = out.reset_index().rename(columns={"index": "node"})
    return out.merge(ctx, left_on="job", right_index=True, how="left")


def _per_node(data: WindowData, name: str, stat: Callable[[np.ndarray], np.ndarray],
              where: dict[str, str] | None = None) -> pd.Series:
    """``stat`` per series (columns of the window matrix), summed per node."""
    t = data.tables.get(name)
    if t is None:
        return pd.Series(dtype=np.float64)
    keep = np.ones(len(t.labels), dtype=bool)
    for k, v in (where or {}).items():
        keep &= _col(t.labels, k) == v
    values = stat(t.values[:, keep])
    frame = pd.DataFrame({"node": _node_of(t.labels)[keep], "v": values})
    return frame.groupby("node")["v"].sum(min_count=1)


def _host_features(data: WindowData, W: slice, P: slice, seconds: float) -> dict[str, dict[str, float]]:
    def rate(rows: slice) -> Callable[[np.ndarray], np.ndarray]:
        return lambda m: _rate(m[rows], seconds)

    def median(rows: slice) -> Callable[[np.ndarray], np.ndarray]:
        return lambda m: _quiet(np.nanmedian, m[rows], axis=0)

    re_w = _per_node(data, "node_netstat_Tcp_RetransSegs", rate(W))
    re_p = _per_node(data, "node_netstat_Tcp_RetransSegs", rate(P))
    rx_w = _per_node(data, "node_network_receive_bytes_total", rate(W))
    rx_p = _per_node(data, "node_network_receive_bytes_total", rate(P))
    drop = _per_node(data, "node_network_receive_drop_total", rate(W))
    cpu = data.tables.get("node_cpu_seconds_total")
    n_cpu = pd.Series(dtype=np.float64)
    if cpu is not None:
        lab = pd.DataFrame({"node": _node_of(cpu.labels), "cpu": _col(cpu.labels, "cpu")})
        n_cpu = lab.drop_duplicates().groupby("node")["cpu"].count().astype(np.float64)
    iowait = _per_node(data, "node_cpu_seconds_total", rate(W), {"mode": "iowait"})
    user = _per_node(data, "node_cpu_seconds_total", rate(W), {"mode": "user"})
    load_w = _per_node(data, "node_load1", median(W))
    load_p = _per_node(data, "node_load1", median(P))
    out: dict[str, dict[str, float]] = {}
    for node in set(re_w.index) | set(load_w.index) | set(iowait.index) | set(rx_w.index):
        def get(s: pd.Series, node: str = node) -> float:
            return float(s.get(node, np.nan))

        out[node] = {
            "tcp_retrans_rate": get(re_w), "tcp_retrans_ratio": (get(re_w) + 1) / (get(re_p) + 1),
            "net_drop_rate": get(drop), "net_rx_ratio": float(_ratio(get(rx_w), get(rx_p))),
            "cpu_iowait_frac": get(iowait) / get(n_cpu) if get(n_cpu) > 0 else np.nan,
            "cpu_user_frac": get(user) / get(n_cpu) if get(n_cpu) > 0 else np.nan,
            "load1_ratio": float(_ratio(get(load_w), get(load_p))),
        }
    return out


def _kube_features(data: WindowData, W: slice, gpu: pd.DataFrame) -> dict[str, dict[str, float]]:
    def wmin(m: np.ndarray) -> np.ndarray:
        return _quiet(np.nanmin, m[W], axis=0)

    def wmax(m: np.ndarray) -> np.ndarray:
        return _quiet(np.nanmax, m[W], axis=0)

    ready = _per_node(data, "kube_node_status_condition", wmin, {"condition": "Ready", "status": "true"})
    alloc = _per_node(data, "kube_node_status_allocatable", wmin, {"resource": "nvidia_com_gpu"})
    cap = _per_node(data, "kube_node_status_capacity", wmax, {"resource": "nvidia_com_gpu"})
    pods = gpu[gpu["pod"] != ""][["node", "namespace", "pod"]].drop_duplicates()
    pod_node = {(ns, p): n for n, ns, p in pods.itertuples(index=False)}

    def by_pod(name: str, stat: Callable[[np.ndarray], np.ndarray], where: dict[str, str] | None = None
               ) -> pd.Series:
        t = data.tables.get(name)
        if t is None:
            return pd.Series(dtype=np.float64)
        keep = np.ones(len(t.labels), dtype=bool)
        for k, v in (where or {}).items():
            keep &= _col(t.labels, k) == v
        node = np.array([pod_node.get((ns, p), "") for ns, p in zip(_col(t.labels, "namespace"),
                                                                     _col(t.labels, "pod"), strict=True)])
        frame = pd.DataFrame({"node": node[keep], "v": stat(t.values[:, keep])})
        return frame[frame["node"] != ""].groupby("node")["v"].sum(min_count=1)

    restarts = by_pod("kube_pod_container_status_restarts_total", lambda m: _increase(m[W]))
    oom = by_pod("kube_pod_container_status_last_terminated_reason", wmax, {"reason": "OOMKilled"})
    has_restarts = "kube_pod_container_status_restarts_total" in data.tables
    has_reason = "kube_pod_container_status_last_terminated_reason" in data.tables
    alerts = None
    if "ALERTS" in data.tables:
        alerts = _per_node(data, "ALERTS", lambda m: (wmax(m) > 0).astype(np.float64), {"alertstate": "firing"})
    out: dict[str, dict[str, float]] = {}
    for node in set(ready.index) | set(alloc.index) | set(gpu["node"]):
        out[node] = {
            "node_ready_min": float(ready.get(node, np.nan)),
            "node_allocatable_ratio": float(_ratio(alloc.get(node, np.nan), cap.get(node, np.nan))),
            "pod_restarts_increase": float(restarts.get(node, 0.0 if has_restarts else np.nan)),
            "oom_killed": float(min(oom.get(node, 0.0 if has_reason else np.nan), 1.0)),
            "alerts_firing": np.nan if alerts is None else float(alerts.get(node, 0.0)),
        }
    return out


def _queue_rows(data: WindowData, W: slice, P: slice) -> pd.DataFrame:
    def per_queue(name: str) -> tuple[pd.DataFrame, np.ndarray] | None:
        t = data.tables.get(name)
        if t is None:
            return None
        keep = np.ones(len(t.labels), dtype=bool)
        if "resource" in t.labels.columns:
            keep &= _col(t.labels, "resource") == "nvidia.com/gpu"
        queues = _col(t.labels, "queue_name")[keep]
        return pd.DataFrame({"queue": queues}), t.values[:, keep]

    def stat(name: str, rows: slice, fn: Callable[..., np.ndarray]) -> pd.Series:
        got = per_queue(name)
        if got is None:
            return pd.Series(dtype=np.float64)
        q, m = got
        return pd.Series(fn(m[rows], axis=0), index=q["queue"]).groupby(level=0).sum(min_count=1)

    def qmin(name: str, rows: slice) -> pd.Series:
        return stat(name, rows, lambda m, axis: _quiet(np.nanmin, m, axis=axis))

    def qmax(name: str, rows: slice) -> pd.Series:
        return stat(name, rows, lambda m, axis: _quiet(np.nanmax, m, axis=axis))

    def qmed(name: str, rows: slice) -> pd.Series:
        return stat(name, rows, lambda m, axis: _quiet(np.nanmedian, m, axis=axis))

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

        rows.append({
            "queue": q, "is_queue": 1.0,
            "queue_capability_ratio": float(_ratio(get(cap_w), get(cap_p))),
            "queue_capability_gpus": get(cap_w) / 1000,
            "queue_deserved_ratio": float(_ratio(get(des_w), get(des_p))),
            "queue_pending_delta": get(pend_w) - get(pend_p),
            "queue_pending_gpus": (get(req_w) - get(alloc_w)) / 1000,
            "queue_alloc_ratio": float(_ratio(get(alloc_w), get(alloc_p))),
        })
    return pd.DataFrame(rows)
