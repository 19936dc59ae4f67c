"""Per-profile root-cause trees: no tree reads what its profile lacks, each cause's reach per profile, the
families a cause needs, and a JSON round trip (the older single-tree format included)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from models.rca import RootCauseTree
from models.rca_features import FEATURE_NAMES
from models.rca_profiled import FORMAT, MIN_PRECISION, ProfiledRca, blank, evaluate_profile, fit_profiled
from models.rca_profiles import PROFILES
from predictor.diagnose.models import load_model_file, save_model_file
from predictor.errors import InputError

LEGACY = Path(__file__).parents[1] / "data" / "rca-legacy-tree.json"
TWO = {n: PROFILES[n] for n in ("dcgm-default", "everything")}
NVLINK_CRC = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"


def _rows(n: int = 600, seed: int = 0) -> pd.DataFrame:
    """Node windows: thermal faults show in temperature (default counters) and throttle reasons (not
    default); NVLink faults only in the NVLink CRC counter, which dcgm-exporter ships commented out."""
    rng = np.random.default_rng(seed)
    rows = pd.DataFrame(rng.normal(0.0, 1.0, (n, len(FEATURE_NAMES))), columns=list(FEATURE_NAMES))
    rows["is_queue"] = 0.0
    label = np.array(["healthy"] * n, dtype=object)
    label[np.arange(n) % 6 == 1] = "gpu_thermal"
    label[np.arange(n) % 6 == 2] = "nvlink"
    hot, link = label == "gpu_thermal", label == "nvlink"
    rows.loc[hot, "gpu_temp_p95_max"] += 8.0
    rows.loc[hot, "throttle_thermal_frac_max"] += 8.0
    rows.loc[link, "nvlink_crc_rate_max"] += 8.0
    return rows.assign(label=label, strength=np.where(label == "healthy", np.nan, 1.0))


@pytest.fixture(scope="module")
def model() -> ProfiledRca:
    return fit_profiled(_rows(), profiles=TWO, model=RootCauseTree(cv=2, n_alphas=3))


def _read(tree: RootCauseTree) -> set[str]:
    names = list(tree.feature_names_in_)
    inners = [tree.tree_, *(r.tree for r in tree.reduced_)]
    return {names[f] for t in inners for f in t.tree_.feature if f >= 0}


def test_no_tree_reads_a_feature_its_profile_lacks(model: ProfiledRca) -> None:
    assert set(model.models) == set(TWO)
    assert _read(model.models["dcgm-default"]).isdisjoint(PROFILES["dcgm-default"].absent_features)
    assert "throttle_thermal_frac_max" in PROFILES["dcgm-default"].absent_features
    assert {"gpu_temp_p95_max", "nvlink_crc_rate_max"} & _read(model.models["everything"])


def test_a_cause_whose_only_evidence_is_absent_is_cannot_tell_and_names_the_family(model: ProfiledRca) -> None:
    assert model.cannot_tell("dcgm-default") == ("nvlink",)
    assert model.reach["dcgm-default"]["gpu_thermal"] > 0.9  # the temperature alone tells it
    assert model.cannot_tell("everything") == ()
    # The families of nvlink's own symptoms the profile lacks, its first choice first (models.rca_evidence).
    needs = model.needs("dcgm-default", "nvlink")
    assert needs[0] == NVLINK_CRC and all(f.startswith("DCGM_FI_DEV_NVLINK_") for f in needs)
    held_out = _rows(300, seed=1)
    default = evaluate_profile(model, held_out, "dcgm-default")
    assert default.undiagnosable.get("nvlink", 0) == (held_out["label"] == "nvlink").sum()
    assert default.top1 > 0.9 and default.insufficient == 0.0  # the rest answered, none "unmeasured"
    assert default.top1_strict < default.top1  # NVLink rows count wrong in the strict score
    assert evaluate_profile(model, held_out, "everything").top1_strict > 0.9


def test_the_profile_follows_the_families_a_window_returned(model: ProfiledRca) -> None:
    default = PROFILES["dcgm-default"].present
    assert model.for_present(default)[0].name == "dcgm-default"
    assert model.for_present(PROFILES["everything"].present)[0].name == "everything"
    # Throttle reasons on top of the defaults: still only the defaults' tree fits among these two.
    assert model.for_present(default | {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"})[0].name == "dcgm-default"


def test_json_round_trip_is_exact(model: ProfiledRca, tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    save_model_file(model, path)
    assert json.loads(path.read_text())["format"] == FORMAT
    again = load_model_file(path)
    X = blank(_rows(50, seed=2), PROFILES["dcgm-default"])[list(FEATURE_NAMES)]
    for name in TWO:
        np.testing.assert_array_equal(again.models[name].predict_proba(X), model.models[name].predict_proba(X))
    assert again.reach == model.reach and again.cannot_tell("dcgm-default") == ("nvlink",)
    assert again.profiles["dcgm-default"].absent == PROFILES["dcgm-default"].absent


def test_a_single_tree_file_loads_as_a_one_profile_model() -> None:
    legacy = load_model_file(LEGACY)
    assert list(legacy.models) == ["everything"] and legacy.cannot_tell("everything") == ()
    tree = RootCauseTree.from_dict(json.loads(LEGACY.read_text()))
    X = _rows(20)[list(FEATURE_NAMES)]
    profile, chosen = legacy.for_present(PROFILES["dcgm-default"].present)
    assert profile.name == "everything"
    np.testing.assert_array_equal(chosen.predict_proba(X), tree.predict_proba(X))


@pytest.mark.parametrize(
    "content",
    [
        {"format": FORMAT, "models": 3},
        {"format": FORMAT, "profiles": [], "models": {}, "reach": {}, "confused": {}},
        {"format": "gpu-rca-forest/9"},
    ],
)
def test_malformed_model_files_are_one_line_errors(content: object, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(content))
    with pytest.raises(InputError, match=r"bad\.json") as info:
        load_model_file(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ({"format": FORMAT}, f"malformed {FORMAT} model: no 'profiles' field"),
        ({"format": "gpu-rca-tree/1"}, "malformed gpu-rca-tree/1 model: no 'params' field"),
    ],
)
def test_a_missing_field_is_named_as_missing(content: object, says: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(content))
    with pytest.raises(InputError) as info:
        load_model_file(path)
    assert says in str(info.value)  # not the bare key ("...model: 'profiles'"), which reads as nothing


def _with_nvlink_precision(model: ProfiledRca, precision: float) -> ProfiledRca:
    return ProfiledRca(
        copy.deepcopy(model.models),
        dict(model.profiles),
        model.reach,
        model.confused,
        {**model.precision, "dcgm-default": {**model.precision["dcgm-default"], "nvlink": precision}},
    )


def test_a_cause_the_profile_cannot_tell_is_still_named_where_its_tree_is_right_about_it(model: ProfiledRca) -> None:
    # Measured per profile and cause in held-out folds: the temperature names thermal faults rightly.
    assert model.precision["dcgm-default"]["gpu_thermal"] >= MIN_PRECISION
    # Were the default profile's nvlink answers right (as XID 74 makes them on the simulator's faults), its
    # main tree would keep naming nvlink where it does, though it misses most NVLink faults; its reduced
    # trees (answers not measured) would not.
    sure = _with_nvlink_precision(model, 0.97)
    assert sure.cannot_tell("dcgm-default") == ("nvlink",) and sure.named_when_sure("dcgm-default") == ("nvlink",)
    tree = sure.models["dcgm-default"]
    assert tree.blind_ == () and tree.blind_reduced_ == ("nvlink",)
    X = blank(_rows(300, seed=1), PROFILES["dcgm-default"])[list(FEATURE_NAMES)]
    column = list(model.models["dcgm-default"].classes_).index("nvlink")
    assert (model.models["dcgm-default"].predict_proba(X)[:, column] == 0).all()
    assert (tree.predict_proba(X)[:, column] > 0).any()
    # Scored as answered where the main tree names it, apart ("undiagnosable") where the cause is left out.
    held_out = _rows(300, seed=1)
    nvlink_rows = int((held_out["label"] == "nvlink").sum())
    assert evaluate_profile(model, held_out, "dcgm-default").undiagnosable.get("nvlink", 0) == nvlink_rows
    assert evaluate_profile(sure, held_out, "dcgm-default").undiagnosable.get("nvlink", 0) == 0


def test_a_cause_named_wrongly_stays_out_and_files_without_precision_keep_the_old_rule(
    model: ProfiledRca, tmp_path: Path
) -> None:
    assert model.precision["dcgm-default"]["nvlink"] < MIN_PRECISION  # a guess from noise, when it names it
    assert model.named_when_sure("dcgm-default") == () and model.models["dcgm-default"].blind_ == ("nvlink",)
    sure = _with_nvlink_precision(model, 0.97)
    path = tmp_path / "m.json"
    save_model_file(sure, path)
    data = json.loads(path.read_text())
    assert load_model_file(path).precision == sure.precision
    del data["precision"]  # a file written before precision was measured
    path.write_text(json.dumps(data))
    assert load_model_file(path).models["dcgm-default"].blind_ == ("nvlink",)


@pytest.mark.parametrize(
    "precision",
    [
        [["dcgm-default", {"nvlink": 1}]],
        "high",
        {"dcgm-default": {"nvlink": 5}},
        {"dcgm-default": {"nvlink": True}},
        {"dcgm-default": {"nvlink": "NaN"}},
        {"no-such-profile": {"nvlink": 0.5}},
    ],
)
def test_a_malformed_precision_field_is_one_line_naming_it(
    model: ProfiledRca, precision: object, tmp_path: Path
) -> None:
    path = tmp_path / "m.json"
    save_model_file(model, path)
    path.write_text(json.dumps({**json.loads(path.read_text()), "precision": precision}))
    with pytest.raises(InputError, match="precision") as info:
        load_model_file(path)
    assert "\n" not in str(info.value)
