"""Symptom features: the documented table, robustness to missing series, and one code path for all sources."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models.frames import ID, TIME, VALUE
from models.rca_features import FEATURE_NAMES, SPECS, WindowData, window_features
from pipelines.rca_data import label_windows, to_long_frame, to_window_data
from pipelines.rca_default import DESIGN_MD, FEATURES_MD, design_section, features_markdown
from predictor import sim

W = pd.Timedelta(minutes=15)


def test_every_feature_is_documented_in_features_md() -> None:
    assert FEATURES_MD.read_text(encoding="utf-8") == features_markdown()
    # docs/design.md carries the same table with why each feature is scale-free, and every metric read.
    assert design_section() in DESIGN_MD.read_text(encoding="utf-8")
    assert all(s.why for s in SPECS)
    assert len({s.name for s in SPECS}) == len(SPECS)
    assert all(s.source and s.meaning for s in SPECS)


def test_missing_series_are_nan_not_errors() -> None:
    t = pd.date_range("2026-03-02", periods=40, freq="1min", tz="UTC")
    frame = pd.DataFrame(
        {
            ID: 'DCGM_FI_DEV_GPU_UTIL{Hostname="n1",gpu="0"}',
            TIME: t,
            VALUE: 50.0,
            "__name__": "DCGM_FI_DEV_GPU_UTIL",
            "Hostname": "n1",
            "gpu": "0",
        }
    )
    feats = window_features(WindowData(frame), t[-1], W)
    assert list(feats["node"]) == ["n1"]
    row = feats.iloc[0]
    assert row["gpu_util_mean"] == pytest.approx(50.0)
    assert np.isnan(row["gpu_temp_p95_max"]) and np.isnan(row["tcp_retrans_ratio"])
    assert set(FEATURE_NAMES) <= set(feats.columns)


def test_empty_window_gives_no_rows() -> None:
    t = pd.date_range("2026-03-02", periods=5, freq="1min", tz="UTC")
    frame = pd.DataFrame({ID: "node_load1", TIME: t, VALUE: 1.0, "__name__": "node_load1"})
    feats = window_features(WindowData(frame), t[-1] + pd.Timedelta(days=1), W)
    assert feats.empty or feats[list(FEATURE_NAMES)].isna().all().all() or len(feats) <= 1


@pytest.mark.slow
def test_long_frame_and_simulator_matrices_give_the_same_features(small_sim: sim.SimResult) -> None:
    # The Prometheus / --history path (long frames) and the training path (matrices) must agree exactly.
    at = pd.Timestamp(small_sim.grid.start_s, unit="s", tz="UTC") + pd.Timedelta(hours=5, minutes=30)
    fast = window_features(to_window_data(small_sim), at, W)
    frame = to_long_frame(small_sim)
    stamps = frame[TIME]
    slow = window_features(WindowData(frame[(stamps > at - 2 * W) & (stamps <= at)]), at, W)
    pd.testing.assert_frame_equal(fast.reset_index(drop=True), slow.reset_index(drop=True), check_dtype=False)


@pytest.mark.slow
def test_injected_faults_show_in_their_features(small_sim: sim.SimResult) -> None:
    data = to_window_data(small_sim)
    faults = small_sim.faults
    checks = {
        "gpu_thermal": lambda r: r["gpu_temp_p95_max"] > 85,
        "gpu_power_cap": lambda r: r["throttle_power_frac_max"] > 0.5 and r["sm_clock_drop_max"] > 0.1,
        "gpu_hardware": lambda r: r["xid_max"] > 0,
        "nvlink": lambda r: r["nvlink_crc_rate_max"] > 0.5,
        "node_not_ready": lambda r: r["node_ready_min"] == 0,
        "scheduling_starvation": lambda r: r["queue_capability_zero"] == 1,
    }
    seen = set()
    for f in faults.to_dict("records"):
        if f["cause"] not in checks or f["end"] - f["start"] < 2 * W:
            continue
        at = f["start"] + pd.Timedelta(minutes=20)
        rows = label_windows(window_features(data, at, W), faults, at, W)
        hit = rows[rows["label"] == f["cause"]]
        assert len(hit), f"{f['cause']} at {at} was not labelled"
        assert hit.apply(checks[f["cause"]], axis=1).any(), f"{f['cause']} at {at}: {hit.iloc[0].to_dict()}"
        seen.add(f["cause"])
    assert len(seen) >= 5


def test_features_do_not_grow_with_cluster_or_quota_size(small_sim: sim.SimResult) -> None:
    # Scale-free: doubling every queue's quota and request (a cluster twice the size) changes no feature.
    data = to_window_data(small_sim)
    at = pd.Timestamp(small_sim.grid.start_s, unit="s", tz="UTC") + pd.Timedelta(hours=5, minutes=30)
    before = window_features(data, at, W)
    for name, table in data.tables.items():
        if name.startswith("volcano_queue_") and name.endswith("_scalar_resources"):
            table.values *= 2
    after = window_features(data, at, W)
    pd.testing.assert_frame_equal(before, after)


def test_a_missing_family_blanks_exactly_its_features(small_sim: sim.SimResult) -> None:
    from models.rca_specs import features_of_family

    at = pd.Timestamp(small_sim.grid.start_s, unit="s", tz="UTC") + pd.Timedelta(hours=5, minutes=30)
    full = window_features(to_window_data(small_sim), at, W)
    family = "volcano_queue_request_scalar_resources"
    data = to_window_data(small_sim)
    del data.tables[family]
    part = window_features(data, at, W)
    blanked = set(features_of_family(family))
    queues = part["is_queue"] == 1
    assert blanked == {"queue_unmet_frac"} and part.loc[queues, "queue_unmet_frac"].isna().all()
    assert full.loc[queues, "queue_unmet_frac"].notna().any()
    others = [c for c in FEATURE_NAMES if c not in blanked]
    pd.testing.assert_frame_equal(full[others], part[others])
