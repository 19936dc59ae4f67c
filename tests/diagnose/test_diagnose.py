"""``predictor diagnose`` end to end: a real Prometheus holding simulated history with injected faults,
the same history as a file, and the JSON contract. Uses the bundled default model (out-of-the-box path)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from models.rca_profiles import PROFILES
from pipelines.rca_data import to_long_frame
from predictor import sim
from predictor.cli import main
from predictor.sources.files import write_frame
from tests.support.localprom import LocalPrometheus

# From the faults table of tests/diagnose/conftest.SMALL (deterministic for its seed).
THERMAL_AT = "2026-03-09T10:59:00Z"  # gpu_thermal on node-005 GPU 5 since 10:39
CLEAN_AT = "2026-03-09T03:15:00Z"  # no fault anywhere in (02:45, 03:15] nor the window before
LEGACY = Path(__file__).parents[1] / "data" / "rca-legacy-tree.json"  # a model file of the single-tree format


def _fault(run: sim.SimResult, cause: str, at: str) -> dict[str, Any]:
    t = pd.Timestamp(at)
    rows = run.faults[(run.faults["cause"] == cause) & (run.faults["start"] < t) & (run.faults["end"] > t)]
    assert len(rows) == 1
    return dict(rows.iloc[0])


def _quiet(run: sim.SimResult, at: str) -> None:
    t = pd.Timestamp(at)
    touching = run.faults[(run.faults["end"] > t - pd.Timedelta(minutes=30)) & (run.faults["start"] < t)]
    assert touching.empty, touching


def _check_shape(result: dict[str, Any], at: str) -> None:
    assert set(result) == {"at", "window", "families", "profile", "findings"}
    assert set(result["families"]) == {"found", "missing"} and "DCGM_FI_DEV_GPU_UTIL" in result["families"]["found"]
    assert pd.Timestamp(result["at"]) == pd.Timestamp(at) and result["window"] == "15m"
    probs = [f["probability"] for f in result["findings"]]
    assert probs == sorted(probs, reverse=True) and probs
    for f in result["findings"]:
        assert set(f) == {"cause", "probability", "scope", "explanation", "remediation"}
        assert isinstance(f["remediation"], str) and len(f["remediation"]) > 20
        assert set(f["scope"]) == {"node", "gpu", "job"}
        assert isinstance(f["explanation"], str) and "→" in f["explanation"]


def _diagnose(args: list[str], out: Path) -> dict[str, Any]:
    assert main(["diagnose", *args, "--out", str(out)]) == 0
    result: dict[str, Any] = json.loads(out.read_text())
    return result


@pytest.fixture(scope="module")
def history_file(small_sim: sim.SimResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rca-history") / "history.parquet"
    write_frame(to_long_frame(small_sim), path)
    return path


@pytest.fixture(scope="module")
def prometheus(
    small_sim: sim.SimResult, tmp_path_factory: pytest.TempPathFactory, prometheus_from_openmetrics: Any
) -> LocalPrometheus:
    out = tmp_path_factory.mktemp("rca-om")
    small_sim.write(out, openmetrics=True, parquet=False)
    server: LocalPrometheus = prometheus_from_openmetrics(out / "metrics.om")
    return server


@pytest.mark.slow
def test_history_file_names_cause_and_scope(small_sim: sim.SimResult, history_file: Path, tmp_path: Path) -> None:
    fault = _fault(small_sim, "gpu_thermal", THERMAL_AT)
    result = _diagnose(["--history", str(history_file), "--at", THERMAL_AT], tmp_path / "d.json")
    _check_shape(result, THERMAL_AT)
    thermal = [f for f in result["findings"] if f["cause"] == "gpu_thermal"]
    assert thermal and thermal[0]["scope"]["node"] == fault["node"] and thermal[0]["scope"]["gpu"] == fault["gpu"]


@pytest.mark.slow
def test_clean_window_is_healthy(small_sim: sim.SimResult, history_file: Path, tmp_path: Path) -> None:
    _quiet(small_sim, CLEAN_AT)
    result = _diagnose(["--history", str(history_file), "--at", CLEAN_AT], tmp_path / "d.json")
    _check_shape(result, CLEAN_AT)
    assert [f["cause"] for f in result["findings"]] == ["healthy"]
    assert result["findings"][0]["scope"] == {"node": None, "gpu": None, "job": None}


@pytest.mark.slow
def test_real_prometheus_names_the_injected_cause_and_says_healthy_when_clean(
    small_sim: sim.SimResult, prometheus: LocalPrometheus, tmp_path: Path
) -> None:
    fault = _fault(small_sim, "gpu_thermal", THERMAL_AT)
    url = ["--prometheus-url", prometheus.url]
    scoped = _diagnose([*url, "--at", THERMAL_AT, "--scope", f"node={fault['node']}"], tmp_path / "a.json")
    _check_shape(scoped, THERMAL_AT)
    top = scoped["findings"][0]
    assert top["cause"] == "gpu_thermal", scoped
    assert top["scope"]["node"] == fault["node"] and top["scope"]["gpu"] == fault["gpu"]
    assert top["scope"]["job"] and fault["job_id"] in top["scope"]["job"]
    clean = _diagnose([*url, "--at", CLEAN_AT], tmp_path / "b.json")
    assert [f["cause"] for f in clean["findings"]] == ["healthy"], clean


@pytest.mark.slow
def test_history_without_volcano_request_series_is_not_a_fault(small_sim: sim.SimResult, tmp_path: Path) -> None:
    # A history that lacks volcano_queue_request_scalar_resources once made every quiet window a
    # scheduling_starvation at 0.996. Unknown is not evidence: a clean window is not a fault, the family is
    # listed as missing, and a real fault in the same history is still found.
    _quiet(small_sim, CLEAN_AT)
    frame = to_long_frame(small_sim)
    path = tmp_path / "no-request.parquet"
    write_frame(frame[frame["__name__"] != "volcano_queue_request_scalar_resources"], path)
    clean = _diagnose(["--history", str(path), "--at", CLEAN_AT], tmp_path / "c.json")
    _check_shape(clean, CLEAN_AT)
    assert "volcano_queue_request_scalar_resources" in clean["families"]["missing"]
    assert {f["cause"] for f in clean["findings"]} <= {"healthy", "insufficient_data"}, clean
    fault = _fault(small_sim, "gpu_thermal", THERMAL_AT)
    hot = _diagnose(["--history", str(path), "--at", THERMAL_AT], tmp_path / "h.json")
    thermal = [f for f in hot["findings"] if f["cause"] == "gpu_thermal"]
    assert thermal and thermal[0]["scope"]["node"] == fault["node"] and thermal[0]["scope"]["gpu"] == fault["gpu"]
    assert "cooling" in thermal[0]["remediation"]


@pytest.mark.slow
def test_history_without_tcp_counters_blames_no_network_on_a_quiet_cluster(
    small_sim: sim.SimResult, tmp_path: Path
) -> None:
    # Without retransmits and drops the tree that reads them is replaced by one trained without them: a
    # clean window stays clean (no congestion made up from the gap), the GPU fault is still found.
    gone = {"node_netstat_Tcp_RetransSegs", "node_network_receive_drop_total"}
    frame = to_long_frame(small_sim)
    path = tmp_path / "no-tcp.parquet"
    write_frame(frame[~frame["__name__"].isin(gone)], path)
    clean = _diagnose(["--history", str(path), "--at", CLEAN_AT], tmp_path / "c.json")
    _check_shape(clean, CLEAN_AT)
    assert gone <= set(clean["families"]["missing"])
    assert {f["cause"] for f in clean["findings"]} <= {"healthy", "insufficient_data"}, clean
    hot = _diagnose(["--history", str(path), "--at", THERMAL_AT], tmp_path / "h.json")
    assert "gpu_thermal" in {f["cause"] for f in hot["findings"]}, hot


@pytest.mark.slow
def test_history_with_almost_nothing_measured_is_insufficient_data(small_sim: sim.SimResult, tmp_path: Path) -> None:
    frame = to_long_frame(small_sim)
    path = tmp_path / "thin.parquet"
    write_frame(frame[frame["__name__"].isin(["node_load1", "volcano_queue_allocated_scalar_resources"])], path)
    result = _diagnose(["--history", str(path), "--at", THERMAL_AT], tmp_path / "t.json")
    assert [f["cause"] for f in result["findings"]] == ["insufficient_data"], result
    assert "DCGM_FI_DEV_GPU_UTIL" in result["findings"][0]["remediation"]


def test_bad_inputs_are_one_line_errors(history_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "x.json")
    assert main(["diagnose", "--at", THERMAL_AT, "--out", out]) == 1
    assert "exactly one of --prometheus-url" in capsys.readouterr().err
    assert main(["diagnose", "--history", str(history_file), "--at", "yesterday-ish", "--out", out]) == 1
    assert "--at" in capsys.readouterr().err
    assert (
        main(["diagnose", "--history", str(history_file), "--at", THERMAL_AT, "--scope", "rack=7", "--out", out]) == 1
    )
    assert "--scope" in capsys.readouterr().err
    assert (
        main(
            [
                "diagnose",
                "--history",
                str(history_file),
                "--at",
                THERMAL_AT,
                "--model",
                str(tmp_path / "nope.json"),
                "--out",
                out,
            ]
        )
        == 1
    )
    assert "nope.json" in capsys.readouterr().err
    assert not Path(out).exists()


def _only(frame: pd.DataFrame, families: frozenset[str], path: Path) -> Path:
    write_frame(frame[frame["__name__"].isin(families)], path)
    return path


@pytest.mark.slow
def test_the_profile_follows_the_families_the_window_returned(small_sim: sim.SimResult, tmp_path: Path) -> None:
    frame = to_long_frame(small_sim)
    default = PROFILES["dcgm-default"].present
    throttle = default | {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"}
    for families, expected in ((default, "dcgm-default"), (throttle, "dcgm-default+throttle")):
        path = _only(frame, families, tmp_path / f"{expected}.parquet")
        result = _diagnose(["--history", str(path), "--at", CLEAN_AT], tmp_path / f"{expected}.json")
        assert result["profile"] == expected, result["families"]


@pytest.mark.slow
def test_a_default_dcgm_exporter_still_names_a_thermal_fault_and_a_quiet_window_healthy(
    small_sim: sim.SimResult, tmp_path: Path
) -> None:
    # dcgm-exporter as shipped: no throttle reasons, ECC or NVLink error counters. The thermal fault is told
    # by temperature and clocks (not mistaken for a power cap, which without throttle reasons looks alike),
    # and a quiet window is healthy, not insufficient_data.
    path = _only(to_long_frame(small_sim), PROFILES["dcgm-default"].present, tmp_path / "default.parquet")
    fault = _fault(small_sim, "gpu_thermal", THERMAL_AT)
    hot = _diagnose(["--history", str(path), "--at", THERMAL_AT], tmp_path / "h.json")
    _check_shape(hot, THERMAL_AT)
    assert hot["profile"] == "dcgm-default"
    on_node = [f for f in hot["findings"] if f["scope"]["node"] == fault["node"]]
    assert on_node and on_node[0]["cause"] == "gpu_thermal", hot["findings"]
    assert {f["cause"] for f in on_node}.isdisjoint({"gpu_power_cap", "insufficient_data"})
    _quiet(small_sim, CLEAN_AT)
    clean = _diagnose(["--history", str(path), "--at", CLEAN_AT], tmp_path / "c.json")
    assert [f["cause"] for f in clean["findings"]] == ["healthy"], clean


@pytest.mark.slow
def test_a_single_tree_model_file_still_diagnoses(history_file: Path, tmp_path: Path) -> None:
    result = _diagnose(
        ["--history", str(history_file), "--at", THERMAL_AT, "--model", str(LEGACY)], tmp_path / "l.json"
    )
    _check_shape(result, THERMAL_AT)
    assert result["profile"] == "everything"  # the one profile such a file holds


def test_a_malformed_model_file_is_one_line(
    history_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad-model.json"
    bad.write_text(json.dumps({"format": "gpu-rca-profiled/1", "profiles": [], "models": {"x": 1}}))
    out = tmp_path / "x.json"
    args = ["diagnose", "--history", str(history_file), "--at", THERMAL_AT, "--model", str(bad), "--out", str(out)]
    assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert "bad-model.json" in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def test_help_lists_the_families_each_cause_needs_per_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Families each cause needs" in text and "dcgm-default" in text
    # The shipped defaults cannot tell RoCE faults: the help says which counters to enable, and how.
    assert "cannot tell `roce_pfc_storm`" in text and "--collector.ethtool" in text


def test_a_query_prometheus_would_refuse_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 30 days back twice at 1 s is millions of points per series: said before any query is sent.
    out = tmp_path / "x.json"
    url, at = "http://127.0.0.1:9", "2026-03-09T05:16:00Z"
    args = ["diagnose", "--prometheus-url", url, "--at", at, "--window", "30d", "--step", "1s", "--out", str(out)]
    assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert "--step 1s" in err and "11,000" in err and len(err.splitlines()) == 1
    assert not out.exists()
