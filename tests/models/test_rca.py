"""The root-cause tree: scikit-learn's estimator contract, JSON round trip, ranking and explanations."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from models.rca import RootCauseTree
from predictor.diagnose.models import load_default, load_model_file, save_model_file
from predictor.errors import InputError


@parametrize_with_checks([RootCauseTree(cv=2, n_alphas=3)])
def test_sklearn_contract(estimator: RootCauseTree, check: object) -> None:
    check(estimator)  # type: ignore[operator]


def _toy() -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(0)
    X = pd.DataFrame(
        {
            "gpu_temp_p95_max": rng.normal(70, 5, 400),
            "sm_clock_drop_max": rng.uniform(0, 0.1, 400),
            "xid_max": np.zeros(400),
        }
    )
    hot = np.arange(400) % 5 == 0
    X.loc[hot, "gpu_temp_p95_max"] += 22
    X.loc[hot, "sm_clock_drop_max"] += 0.3
    broken = np.arange(400) % 7 == 0
    X.loc[broken, "xid_max"] = 79
    X.loc[np.arange(400) % 11 == 0, "xid_max"] = np.nan  # a missing series is a value, not an error
    y = np.where(broken, "gpu_hardware", np.where(hot, "gpu_thermal", "healthy"))
    return X, y


def test_ranks_and_explains_with_measured_values() -> None:
    X, y = _toy()
    model = RootCauseTree().fit(X, y)
    assert (model.predict(X) == y).mean() > 0.95
    ranked = model.rank(X.iloc[:5], k=3)
    assert all(len(r) == 3 and r[0][1] >= r[1][1] >= r[2][1] for r in ranked)
    hot_row = X.iloc[[5]]  # index 5: hot, not broken
    text = model.explain(hot_row)[0]
    assert text.endswith("→ gpu_thermal")
    assert "°C" in text or "%" in text  # values with units, e.g. "gpu_temp_p95_max = 91.2 °C > 81.4 °C"
    assert "=" in text


def test_json_round_trip_is_exact(tmp_path: pytest.TempPathFactory) -> None:
    X, y = _toy()
    model = RootCauseTree().fit(X, y)
    path = tmp_path / "m.json"  # type: ignore[operator]
    save_model_file(model, path)
    again = load_model_file(path).models["everything"]  # a single tree loads as a one-profile model
    np.testing.assert_array_equal(model.predict_proba(X), again.predict_proba(X))
    assert model.explain(X.iloc[:3]) == again.explain(X.iloc[:3])


def test_bad_model_files_name_the_file(tmp_path: pytest.TempPathFactory) -> None:
    bad = tmp_path / "bad.json"  # type: ignore[operator]
    bad.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(InputError, match=r"bad\.json"):
        load_model_file(bad)
    with pytest.raises(InputError, match="no such file"):
        load_model_file(tmp_path / "absent.json")  # type: ignore[operator]


def test_bundled_default_loads_and_knows_every_cause() -> None:
    from models.rca import CLASSES
    from models.rca_profiles import PROFILES

    model = load_default()
    assert set(model.models) == set(PROFILES)
    assert all(set(tree.classes_) == set(CLASSES) for tree in model.models.values())


def test_an_unmeasured_feature_is_unknown_not_evidence() -> None:
    # The toy tree decides "thermal" on temperature; with the temperature missing, the answer is averaged
    # over both branches (it loses probability), says it rests on the missing feature, and never gains.
    X, y = _toy()
    model = RootCauseTree().fit(X, y)
    hot = X.iloc[[5]]
    blind = hot.assign(gpu_temp_p95_max=np.nan, sm_clock_drop_max=np.nan)
    thermal = list(model.classes_).index("gpu_thermal")
    assert model.predict_proba(hot)[0, thermal] > 0.9
    assert model.predict_proba(blind)[0, thermal] < 0.5
    assert model.measured_share(hot)[0] == pytest.approx(1.0)
    assert model.measured_share(blind)[0] < 0.5
    named = model.unmeasured(blind)[0]
    assert named and set(named) <= {"gpu_temp_p95_max", "sm_clock_drop_max"}
    assert "not measured" in model.explain(blind)[0] and named[0] in model.explain(blind)[0]
    np.testing.assert_allclose(model.predict_proba(blind).sum(axis=1), 1.0)


def _two_witnesses() -> tuple[pd.DataFrame, np.ndarray]:
    # Congestion shows in retransmits (clean) and in throughput falling more than GPU work (noisier): a tree
    # with both splits on retransmits alone, so without them it has nothing but an average to give.
    rng = np.random.default_rng(1)
    n = 600
    sick = np.arange(n) % 4 == 0
    X = pd.DataFrame(
        {
            "tcp_retrans_ratio": np.where(sick, rng.uniform(8, 30, n), rng.uniform(0.8, 1.3, n)),
            "net_rx_vs_util": np.where(sick, rng.uniform(0.3, 0.7, n), rng.uniform(0.6, 1.2, n)),
        }
    )
    return X, np.where(sick, "network_congestion", "healthy")


def test_a_missing_family_is_read_by_the_tree_trained_without_it(tmp_path: pytest.TempPathFactory) -> None:
    X, y = _two_witnesses()
    plain = RootCauseTree(cv=3, n_alphas=4).fit(X, y)
    model = RootCauseTree(cv=3, n_alphas=4, reduced=(("tcp_retrans_ratio",),)).fit(X, y)
    blind = X.assign(tcp_retrans_ratio=np.nan)
    sick = y == "network_congestion"
    np.testing.assert_array_equal(model.predict_proba(X), plain.predict_proba(X))  # all measured: main tree
    sick_p = list(plain.classes_).index("network_congestion")
    assert plain.predict_proba(blind)[sick, sick_p].max() < 0.6  # averaged: a coin toss at best
    assert (model.predict(blind) == y).mean() > 0.9  # read from what was measured
    assert np.median(model.measured_share(blind)) == pytest.approx(1.0)  # nothing rests on the missing value
    assert model.cannot_tell(blind.iloc[:3]) == [()] * 3  # the other witness suffices: diagnosable
    # With no other witness, the tree trained without retransmits says it cannot tell congestion at all.
    mute = RootCauseTree(cv=3, n_alphas=4, reduced=(("tcp_retrans_ratio",),)).fit(X.assign(net_rx_vs_util=1.0), y)
    assert mute.cannot_tell(blind.iloc[:1]) == [("network_congestion",)] and mute.cannot_tell(X.iloc[:1]) == [()]
    text = model.explain(blind.iloc[[0]])[0]
    assert "net_rx_vs_util" in text and "trained without tcp_retrans_ratio" in text
    path = tmp_path / "m.json"  # type: ignore[operator]
    save_model_file(model, path)
    again = load_model_file(path).models["everything"]
    np.testing.assert_array_equal(again.predict_proba(blind), model.predict_proba(blind))


def test_a_patch_of_mostly_healthy_windows_is_not_blamed_on_the_few_faults_in_it() -> None:
    # 14 faulty rows mingle with ~120 healthy ones at low values (a fault's job peers that show nothing):
    # class balancing alone would make leaves there answer the fault and page on quiet clusters.
    rng = np.random.default_rng(2)
    a = np.concatenate([rng.uniform(0, 1, 1200), rng.uniform(5, 6, 120), rng.uniform(0, 0.1, 14)])
    X = pd.DataFrame({"nvlink_bw_ratio": a, "cpu_iowait_peer_z": rng.uniform(0, 1, len(a))})
    y = np.repeat(["healthy", "nvlink"], [1200, 134])
    model = RootCauseTree(cv=3, n_alphas=4).fit(X, y)
    leaf, pred = model.tree_.apply(X.to_numpy(np.float64)), model.predict(X)
    mixed = []
    for node in np.unique(leaf):
        rows = leaf == node
        if (y[rows] == "healthy").mean() > 0.5:
            assert (pred[rows] == "healthy").all()
            if (y[rows] == "nvlink").any():
                mixed.append(int(np.flatnonzero(rows)[0]))
    assert (pred[1200:1320] == "nvlink").all()  # the clear cases still are the fault
    assert mixed  # and where they mingle, the fault keeps its share of the probability (ranked second)
    assert all(r[1][0] == "nvlink" and r[1][1] > 0 for r in model.rank(X.iloc[mixed], k=2))
