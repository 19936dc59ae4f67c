"""The independent root-cause fault model: injected signatures, labels of partial windows, bootstrap, rules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.rca_edit import counter
from bench.rca_faults import Fault, Job, label_rows, plan_faults, running_jobs
from bench.rca_independent import ceiling, evidence_shown
from bench.rca_inject import inject
from bench.rca_rules import fit_rules
from bench.rca_scoring import bootstrap, score
from models.rca_evidence import EVIDENCE
from models.rca_features import WindowData, window_features
from models.rca_profiles import PROFILES
from models.rca_window import col, node_of
from pipelines.rca_data import Scenario, simulate_scenario, to_window_data

WINDOW = pd.Timedelta(minutes=15)


@pytest.fixture(scope="module")
def healthy() -> WindowData:
    return to_window_data(simulate_scenario(Scenario(seed=901, nodes=4, fault_rate_per_day=0.0, days=0.25)))


def _fresh(data: WindowData) -> WindowData:
    return WindowData.from_matrices(data.times, {k: (t.values.copy(), t.labels) for k, t in data.tables.items()})


def _job(data: WindowData, k0: int, k1: int, multi_gpu: bool = True) -> Job:
    jobs = [j for j in running_jobs(data) if j.first < k0 and j.last >= k1 and (len(j.gpus) > 1 or not multi_gpu)]
    assert jobs, "the healthy run has a job spanning the fault"
    return max(jobs, key=lambda j: len(j.gpus))


def _at(data: WindowData, k: int) -> pd.Timestamp:
    return pd.Timestamp(int(data.times[k]), tz="UTC")


def _gpu_cols(data: WindowData, name: str, node: str, gpus: tuple[str, ...]) -> np.ndarray:
    t = data.tables[name]
    return np.flatnonzero((node_of(t.labels) == node) & np.isin(col(t.labels, "gpu"), list(gpus)))


def test_thermal_on_two_gpus_heats_only_those(healthy: WindowData) -> None:
    data = _fresh(healthy)
    k0, k1 = 150, 200
    job = _job(data, k0, k1)
    node = job.nodes[0]
    gpus = tuple(g for n, g in job.gpus if n == node)[:2]
    before = data.tables["DCGM_FI_DEV_GPU_TEMP"].values.copy()
    inject(data, [Fault(0, "gpu_thermal", k0, k1, node, gpus, job, strength=1.0)], seed=1)
    hot = _gpu_cols(data, "DCGM_FI_DEV_GPU_TEMP", node, gpus)
    after = data.tables["DCGM_FI_DEV_GPU_TEMP"].values
    rise = np.nanmean(after[k0:k1, hot] - before[k0:k1, hot])
    assert np.nanmean(after[k0:k1, hot]) == pytest.approx(92, abs=1.0)  # 84 + 8·strength, a step onset
    assert rise > 5
    untouched = np.setdiff1d(np.arange(after.shape[1]), hot)
    np.testing.assert_array_equal(after[:, untouched], before[:, untouched])
    np.testing.assert_array_equal(after[:k0], before[:k0])
    feats = window_features(data, _at(data, k0 + 20), WINDOW).set_index("node")
    assert feats["gpu_temp_delta_max"].to_dict()[node] > 15


def test_nvlink_counters_rise_and_not_ready_goes_dark(healthy: WindowData) -> None:
    data = _fresh(healthy)
    k0, k1 = 150, 200
    job = _job(data, k0, k1)
    node, gpu = job.gpus[0]
    other = next(n for n in sorted(set(node_of(data.tables["node_load1"].labels))) if n not in job.nodes)
    faults = [
        Fault(0, "nvlink", k0, k1, node, (gpu,), job, strength=1.0),
        Fault(1, "node_not_ready", k0, k1, other, strength=1.0, dark=True),
    ]
    inject(data, faults, seed=2)
    feats = window_features(data, _at(data, k0 + 20), WINDOW).set_index("node")
    assert feats["nvlink_crc_rate_max"].to_dict()[node] > 0.1  # the healthy run has no CRC errors at all
    assert feats.loc[other, "node_ready_min"] == 0
    util = data.tables["DCGM_FI_DEV_GPU_UTIL"]
    assert np.isnan(util.values[k0:k1, node_of(util.labels) == other]).all()
    crc = data.tables["DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"].values
    assert (np.diff(crc[np.isfinite(crc).all(axis=1)], axis=0) >= 0).all()  # still a counter


def test_oom_crashes_restart_the_pods(healthy: WindowData) -> None:
    data = _fresh(healthy)
    k0, k1 = 150, 180
    job = _job(data, k0, k1, multi_gpu=False)
    inject(data, [Fault(0, "gpu_oom", k0, k1, job.nodes[0], (), job, strength=0.8)], seed=3)
    restarts = data.tables["kube_pod_container_status_restarts_total"]
    mine = np.isin(col(restarts.labels, "pod"), list(job.pods))
    assert np.nanmax(restarts.values[k1 - 1, mine]) >= 1
    assert np.nanmax(restarts.values[:, ~mine]) == 0
    fb = window_features(data, _at(data, k1 - 1), WINDOW).set_index("node")["fb_used_frac_max"].to_dict()
    assert fb[job.nodes[0]] > 0.95


def test_counter_edit_scales_rate_and_stays_monotone() -> None:
    v = np.cumsum(np.full((20, 2), 10.0), axis=0)
    v[:3, 1] = np.nan
    data = WindowData.from_matrices(np.arange(20) * 60 * 10**9, {"c": (v, pd.DataFrame({"node": ["a", "b"]}))})
    counter(data, "c", np.array([0, 1]), 5, 10, np.ones(5), mult=3.0)
    inc = np.diff(data.tables["c"].values, axis=0)
    np.testing.assert_array_equal(inc[4:9], 30.0)
    np.testing.assert_array_equal(inc[9:], 10.0)
    assert np.isnan(data.tables["c"].values[:3, 1]).all()


def _feats(nodes: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"node": nodes, "queue": "", "is_queue": 0.0})


def test_partial_windows_and_peers_are_labelled() -> None:
    times = np.arange(100) * 60 * 10**9
    at = pd.Timestamp(int(times[60]), tz="UTC")  # window = steps 46..60
    job = Job("j", "ns", ("j-0", "j-1"), (("a", "0"), ("b", "0")), 0, 99)
    faults = [
        Fault(0, "gpu_hardware", 56, 80, "a", ("0",), job, xid=79),  # covers 5 of 15 min: a third
        Fault(1, "gpu_thermal", 59, 80, "c", ("0",)),  # 2 of 15 min: too faint, dropped
        Fault(2, "cpu_contention", 20, 40, "d"),  # only the preceding window: dropped
    ]
    out = label_rows(_feats(["a", "b", "c", "d", "e"]), faults, times, at, WINDOW).set_index("node")
    assert list(out.index) == ["a", "b", "e"]
    assert out.loc["a", "label"] == "gpu_hardware" and out.loc["a", "role"] == "culprit"
    assert out.loc["a", "cover"] == pytest.approx(5 / 15)
    assert out.loc["b", "label"] == "gpu_hardware" and out.loc["b", "role"] == "peer"  # waits on the hang
    assert out.loc["e", "label"] == "healthy"


def test_planned_faults_keep_one_fault_per_node_at_a_time(healthy: WindowData) -> None:
    faults = plan_faults(healthy, seed=5, n_faults=26, window_steps=15, cascades=1)
    assert len({f.cause for f in faults}) >= 8
    assert [f.phase for f in faults if f.phase] == ["nvlink", "hang", "restarts"]
    cascade = [f for f in faults if f.phase]
    assert [f.end for f in cascade[:2]] == [f.start for f in cascade[1:]]  # one fault after the other, no gap
    spans = [(f.fault_id, f.culprits() | f.peers() | set(f.job_nodes), f.start, f.end) for f in faults if not f.phase]
    for i, a, s0, e0 in spans:
        for j, b, s1, e1 in spans:
            if i < j and a & b:
                assert e0 + 15 <= s1 or e1 + 15 <= s0


def test_bootstrap_interval_contains_the_point() -> None:
    rng = np.random.default_rng(0)
    values = rng.random(500) < 0.8
    point, low, high = bootstrap(values.astype(float), np.arange(500) // 5)
    assert low < point < high and high - low < 0.2
    n = 400
    rows = pd.DataFrame(
        {
            "label": np.where(np.arange(n) % 4 == 0, "gpu_thermal", "healthy"),
            "role": np.where(np.arange(n) % 4 == 0, "culprit", ""),
            "node": [f"n{i % 8}" for i in range(n)],
            "scenario": "s",
            "at": np.arange(n) // 8,
            "fault_id": np.where(np.arange(n) % 4 == 0, np.arange(n), -1),
        }
    )
    shown = np.where(rng.random(n) < 0.85, rows["label"], "gpu_oom")
    s = score(rows, shown, np.ones(n), n_boot=200)
    for m in ("macro_f1", "top1_strict", "node_scope", "false_alarms"):
        assert s.low[m] <= s.point[m] <= s.high[m]


def test_rule_thresholds_come_from_the_training_rows() -> None:
    rng = np.random.default_rng(1)
    hot = rng.random(600) < 0.2
    train = pd.DataFrame(
        {
            "label": np.where(hot, "gpu_thermal", "healthy"),
            "gpu_temp_p95_max": np.where(hot, rng.uniform(90, 95, 600), rng.uniform(50, 80, 600)),
            "strength": np.where(hot, 0.8, np.nan),
        }
    )
    rules = fit_rules(train)
    (rule,) = rules.rules
    assert rule.feature == "gpu_temp_p95_max"
    assert train.loc[~hot, "gpu_temp_p95_max"].max() <= rule.threshold < train.loc[hot, "gpu_temp_p95_max"].min()
    shifted = train.assign(gpu_temp_p95_max=train["gpu_temp_p95_max"] - 20)
    assert fit_rules(shifted).rules[0].threshold == pytest.approx(rule.threshold - 20, abs=1.0)
    shown, _ = rules.answer(pd.DataFrame({"gpu_temp_p95_max": [70.0, 97.0, np.nan]}))
    assert list(shown) == ["healthy", "gpu_thermal", "healthy"]  # unmeasured never fires


def test_a_flapping_link_flaps_in_every_window_it_covers(healthy: WindowData) -> None:
    data = _fresh(healthy)
    k0, k1 = 150, 210
    job = _job(data, k0, k1, multi_gpu=False)
    node = job.nodes[0]
    inject(data, [Fault(0, "nic_link_flap", k0, k1, node, (), job, strength=0.7)], seed=4)
    for end in (k0 + 15, k0 + 30, k0 + 45, k1 - 1):
        feats = window_features(data, _at(data, end), WINDOW).set_index("node")
        assert feats["carrier_changes"].to_dict()[node] >= 2  # at least one down-and-up in 15 minutes
    before = window_features(data, _at(data, k0 - 1), WINDOW).set_index("node")
    assert before["carrier_changes"].to_dict()[node] == 0


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--profiles", "nope"], "error: --profiles: unknown nope"),
        (["--model", "nope"], "error: argument --model: invalid choice: 'nope'"),
        (["--seeds", "x"], "error: --seeds 'x'"),
        (["--boot", "0"], "error: --boot 0"),
        (["--window=-5m"], "error: --window '-5m'"),
    ],
)
def test_a_bad_flag_is_one_line_before_anything_runs(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.rca_independent import main

    with pytest.raises(SystemExit) as info:
        main([*argv, "--cache", str(tmp_path)])
    # sys.exit(text) carries the line as the exit code; the parser writes it to stderr and exits 2
    line = info.value.code if isinstance(info.value.code, str) else capsys.readouterr().err
    assert line.strip().startswith(says) and len(line.strip().splitlines()) == 1, line
    assert list(tmp_path.iterdir()) == []  # nothing simulated or cached


def test_the_ceiling_counts_what_a_profile_cannot_see() -> None:
    # Windows (at): 1 RoCE; 2 NVLink with XID 74 on its culprit; 3 two faults, an NVLink one without XID 74
    # (its peer reports one) and a thermal one; 4 a peer only; 5 a queue fault, outside node scope.
    rows = pd.DataFrame(
        {
            "label": [
                *("healthy", "roce_pfc_storm", "nvlink", "nvlink", "nvlink"),
                *("gpu_thermal", "gpu_oom", "scheduling_starvation"),
            ],
            "role": ["", "culprit", "culprit", "culprit", "peer", "culprit", "peer", "culprit"],
            "scenario": "s",
            "at": [0, 1, 2, 3, 3, 3, 4, 5],
            "fault_id": [-1, 1, 2, 3, 3, 4, 5, 6],
            "xid_nvlink": [0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0],
            "xid_max": 0.0,
        }
    ).assign(**{f: 0.0 for symptoms in EVIDENCE.values() for f, _ in symptoms if f not in ("xid_nvlink", "xid_max")})
    # dcgm-default: no ethtool counters (RoCE unseen), NVLink only where XID 74 shows, peers show nothing
    # of their own; a thermal fault has the temperature and a starved queue Volcano's metrics.
    default = evidence_shown(rows, PROFILES["dcgm-default"])
    assert default.tolist() == [True, False, True, False, False, True, False, True]
    top1, scope = ceiling(rows, PROFILES["dcgm-default"])
    assert top1 == pytest.approx(3 / 7)
    # Node-scope windows: one per (window, fault), the queue fault aside: 1 no, 2 yes, 3/nvlink no, 3/thermal
    # yes, 4 no (a peer only).
    assert scope == pytest.approx(2 / 5)
    assert ceiling(rows, PROFILES["everything"]) == pytest.approx((5 / 7, 4 / 5))  # all but the peers
    with pytest.raises(ValueError, match="causes without evidence"):
        evidence_shown(rows.assign(label="cosmic_rays"), PROFILES["everything"])
    assert np.isnan(ceiling(rows[rows["label"] == "healthy"], PROFILES["everything"])[0])
