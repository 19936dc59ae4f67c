"""A node gone dark is evidence (ABSENT); a family missing cluster-wide is unknown (NaN); a symptom that
does not apply to a measured node (no GPU busy before) is a value (NOT_APPLICABLE), never "unmeasured"."""

from __future__ import annotations

import numpy as np
import pandas as pd

from models.frames import ID, TIME, VALUE
from models.rca_features import ABSENT, NOT_APPLICABLE, WindowData, window_features

W = pd.Timedelta(minutes=15)
T = pd.date_range("2026-03-02", periods=30, freq="1min", tz="UTC")  # preceding window, then this one


def _series(name: str, node: str, values: np.ndarray, **labels: str) -> pd.DataFrame:
    keep = np.isfinite(values)
    extra = "".join(f',{k}="{v}"' for k, v in labels.items())
    return pd.DataFrame(
        {
            ID: f'{name}{{Hostname="{node}"{extra}}}',
            TIME: T[keep],
            VALUE: values[keep],
            "__name__": name,
            "Hostname": node,
            **labels,
        }
    )


def _cluster(dark_from: int | None = 15, kube: bool = True, up: bool = False, n3_gpus: bool = True) -> pd.DataFrame:
    """Three nodes; n3's exporters stop answering from step ``dark_from`` (None: never answered)."""
    parts = []
    for node in ("n1", "n2", "n3"):
        alive = np.ones(len(T), dtype=bool)
        if node == "n3":
            alive[:] = False if dark_from is None else alive
            if dark_from is not None:
                alive[dark_from:] = False
        on = np.where(alive, 1.0, np.nan)
        busy = 0.0 if node == "n1" else 80.0  # n1 idle all along: its GPU ratios do not apply
        if node != "n3" or n3_gpus:
            parts += [
                _series("DCGM_FI_DEV_GPU_UTIL", node, busy * on, gpu="0", pod="" if node == "n1" else "p"),
                _series("DCGM_FI_DEV_GPU_TEMP", node, 60 * on, gpu="0"),
            ]
        parts.append(_series("node_load1", node, 4 * on))
        if kube:
            parts.append(
                _series("kube_node_status_condition", node, np.where(alive, 1.0, 0.0), condition="Ready", status="true")
            )
        if up:
            parts.append(_series("up", node, np.where(alive, 1.0, 0.0), job="node-exporter"))
    return pd.concat(parts, ignore_index=True)


def _row(frame: pd.DataFrame, node: str) -> pd.Series:
    feats = window_features(WindowData(frame), T[-1], W)
    return feats[feats["node"] == node].iloc[0]


def test_a_node_that_stops_reporting_reads_absent() -> None:
    row = _row(_cluster(), "n3")
    assert row["node_ready_min"] == 0
    assert row["gpu_temp_p95_max"] == ABSENT and row["load1_ratio"] == ABSENT and row["gpu_util_mean"] == ABSENT
    assert np.isnan(row["tcp_retrans_ratio"])  # nobody scrapes retransmits here: unknown, not absent
    healthy = _row(_cluster(), "n2")
    assert healthy["gpu_temp_p95_max"] == 60 and healthy["node_ready_min"] == 1


def test_absence_counts_as_evidence_only_with_a_sign_of_the_node() -> None:
    # Down through both windows: it never reported, but Kubernetes says it is not Ready.
    assert _row(_cluster(dark_from=None), "n3")["gpu_temp_p95_max"] == ABSENT
    # DCGM never seen on it (a CPU-only node?) is unknown, unless its scrape target reads `up == 0`.
    assert np.isnan(_row(_cluster(kube=False, n3_gpus=False), "n3")["gpu_temp_p95_max"])
    assert _row(_cluster(kube=False, up=True, n3_gpus=False), "n3")["gpu_temp_p95_max"] == ABSENT
    # A family missing on every node stays unknown, dark node or not.
    frame = _cluster()
    blind = _row(frame[frame["__name__"] != "DCGM_FI_DEV_GPU_TEMP"], "n3")
    assert np.isnan(blind["gpu_temp_p95_max"]) and blind["load1_ratio"] == ABSENT


def test_an_idle_node_is_measured_with_symptoms_that_do_not_apply() -> None:
    row = _row(_cluster(), "n1")  # reports every family, but no GPU was busy: no utilisation ratio to take
    assert row["gpu_util_ratio"] == NOT_APPLICABLE and row["job_util_ratio_spread"] == NOT_APPLICABLE
    assert row["gpu_temp_p95_max"] == 60
