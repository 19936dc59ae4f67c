"""A state that decodes but would crash ``predict`` is refused when it is rebuilt (``models.state_checks``).

scikit-learn's compiled tree walkers do not check bounds: a registered ``DemandRegressor`` whose first tree
points a child past its node array loaded fine and then ended the process with a segmentation fault in
``predict``. Each test corrupts one array of a real fitted model's state, the way a registry writer could,
and expects a refusal naming the array.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from models.demand import DemandRegressor
from models.rca import RootCauseTree
from models.state import STATE_FORMAT, Encoder, StateError, from_state, to_state

FIRST_TREE = re.escape("estimator.model_._predictors[0][0]")


@pytest.fixture(scope="module")
def demand() -> tuple[DemandRegressor, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = X[:, 0] + rng.normal(size=200)
    return DemandRegressor(max_iter=5, min_samples_leaf=5).fit(X, y), X


def _search(node: Any, attr: str) -> dict[str, Any] | None:
    if isinstance(node, dict):
        attrs = node.get("attrs")
        if isinstance(attrs, dict) and attr in attrs:
            return attrs[attr]  # type: ignore[no-any-return]
        node = list(node.values())
    for child in node if isinstance(node, list) else []:
        found = _search(child, attr)
        if found is not None:
            return found
    return None


def _find(meta: dict[str, Any], attr: str) -> dict[str, Any]:
    """The first encoded attribute ``attr`` in the state's description (depth first)."""
    found = _search(meta, attr)
    assert found is not None, attr
    return found


def _first_tree_nodes(meta: dict[str, Any], arrays: dict[str, np.ndarray], model: DemandRegressor) -> np.ndarray:
    """A writable record view of the stored bytes of the first tree's nodes."""
    ref = _find(meta, "nodes")["ref"]
    return arrays[ref].reshape(-1).view(model.model_._predictors[0][0].nodes.dtype)


def _corrupted(demand: tuple[DemandRegressor, np.ndarray], node: int, field: str, value: Any) -> tuple[Any, Any]:
    model, _ = demand
    meta, arrays = to_state(model)
    _first_tree_nodes(meta, arrays, model)[node][field] = value
    return meta, arrays


def test_the_untouched_state_still_round_trips(demand: tuple[DemandRegressor, np.ndarray]) -> None:
    model, X = demand
    np.testing.assert_array_equal(from_state(*to_state(model)).predict(X), model.predict(X))


def test_a_child_outside_the_node_array_is_refused(demand: tuple[DemandRegressor, np.ndarray]) -> None:
    meta, arrays = _corrupted(demand, 0, "left", 10**6)
    with pytest.raises(StateError, match=rf"{FIRST_TREE}\.nodes\[0\]\.left: child 1000000 of node 0 is outside"):
        from_state(meta, arrays)


def test_a_child_pointing_back_is_refused(demand: tuple[DemandRegressor, np.ndarray]) -> None:
    # node 1 → node 0 → node 1 ...: predict would never return
    meta, arrays = _corrupted(demand, 1, "right", 0)
    with pytest.raises(StateError, match=rf"{FIRST_TREE}\.nodes\[1\]\.right: .*\(out of the node array or a cycle\)"):
        from_state(meta, arrays)


def test_a_feature_index_out_of_range_is_refused(demand: tuple[DemandRegressor, np.ndarray]) -> None:
    meta, arrays = _corrupted(demand, 0, "feature_idx", 3)  # the model reads 3 columns: 0, 1, 2
    with pytest.raises(StateError, match=rf"{FIRST_TREE}\.nodes\[0\]\.feature_idx: feature 3 is outside"):
        from_state(meta, arrays)
    meta, arrays = _corrupted(demand, 0, "feature_idx", -1)
    with pytest.raises(StateError, match=r"feature -1 is outside the model's 3 features"):
        from_state(meta, arrays)


def test_a_nan_threshold_is_refused(demand: tuple[DemandRegressor, np.ndarray]) -> None:
    meta, arrays = _corrupted(demand, 0, "num_threshold", np.nan)
    with pytest.raises(StateError, match=rf"{FIRST_TREE}\.nodes\[0\]\.num_threshold: split threshold nan"):
        from_state(meta, arrays)


def test_an_infinite_threshold_still_loads(demand: tuple[DemandRegressor, np.ndarray]) -> None:
    """scikit-learn writes +inf for a split that sends only the missing values right: not a refusal."""
    _, X = demand
    meta, arrays = _corrupted(demand, 0, "num_threshold", np.inf)
    back = from_state(meta, arrays)
    assert np.isfinite(back.predict(X)).all()


def test_a_wrong_shape_array_is_refused(demand: tuple[DemandRegressor, np.ndarray]) -> None:
    model, _ = demand
    meta, arrays = to_state(model)
    baseline = _find(meta, "_baseline_prediction")
    arrays[baseline["ref"]] = np.zeros((1, 2))
    baseline["shape"] = [1, 2]  # the writer controls the description as well as the bytes
    with pytest.raises(StateError, match=r"estimator\.model_\._baseline_prediction: is \[1, 2\]"):
        from_state(meta, arrays)
    meta, arrays = to_state(model)
    empty = _find(meta, "empty_features_")
    arrays[empty["ref"]] = np.zeros(5, dtype=bool)
    empty["shape"] = [5]
    with pytest.raises(StateError, match=r"estimator\.empty_features_: has 5 entries for 3 features"):
        from_state(meta, arrays)


def test_a_node_layout_other_than_scikit_learns_is_refused(demand: tuple[DemandRegressor, np.ndarray]) -> None:
    model, _ = demand
    meta, arrays = to_state(model)
    nodes = _find(meta, "nodes")
    nodes["fields"] = [f for f in nodes["fields"] if f[0] != "bitset_idx"]
    with pytest.raises(StateError, match=rf"{FIRST_TREE}\.nodes: has the record layout .* not scikit-learn's"):
        from_state(meta, arrays)


CRAFTED_PREDICT = """
import sys
import json
import numpy as np
from safetensors.numpy import load_file
from models.state import StateError, from_state
meta = json.loads(open(sys.argv[1]).read())
try:
    model = from_state(meta, load_file(sys.argv[2]))
except StateError as exc:
    print("refused:", exc)
    sys.exit(3)
model.predict(np.zeros((4, 3)))
print("predicted")
"""


def test_the_crafted_model_ends_in_a_refusal_not_a_crash(
    demand: tuple[DemandRegressor, np.ndarray], tmp_path: Path
) -> None:
    """In a separate interpreter: without the checks this process dies with SIGSEGV in ``predict``."""
    meta, arrays = _corrupted(demand, 0, "left", 10**6)
    (tmp_path / "state.json").write_text(json.dumps(meta))
    save_file(arrays, str(tmp_path / "arrays.safetensors"))
    assert load_file(str(tmp_path / "arrays.safetensors")).keys() == arrays.keys()
    done = subprocess.run(
        [sys.executable, "-c", CRAFTED_PREDICT, str(tmp_path / "state.json"), str(tmp_path / "arrays.safetensors")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3, (done.returncode, done.stderr[-500:])
    assert done.stdout.startswith("refused: malformed state: estimator.model_._predictors[0][0].nodes[0].left")


# ------------------------------------------------------------------------------- root-cause trees
@pytest.fixture(scope="module")
def rca_dict() -> dict[str, Any]:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(120, 4))
    y = np.where(X[:, 0] > 0.3, "hot", np.where(X[:, 1] > 0.5, "slow", "ok"))
    return RootCauseTree(cv=2, n_alphas=2).fit(X, y).to_dict()


def _rca_state(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    encoder = Encoder()
    tree = encoder.value(data, "estimator.to_dict()")
    root = {"$": "object", "type": "models.rca.RootCauseTree", "state": {"tree": tree}}
    return {"format": STATE_FORMAT, "root": root}, encoder.arrays


def _split_node(data: dict[str, Any]) -> int:
    return next(i for i, left in enumerate(data["nodes"]["left_child"]) if left != -1)


def test_an_intact_root_cause_tree_loads(rca_dict: dict[str, Any]) -> None:
    assert isinstance(from_state(*_rca_state(rca_dict)), RootCauseTree)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("left_child", 10**6, r"\.nodes\[{i}\]\.left: child 1000000 of node {i} is outside"),
        ("right_child", 0, r"\.nodes\[{i}\]\.right: child 0 of node {i} is outside"),
        ("feature", 4, r"\.nodes\[{i}\]\.feature: 4 is outside the 4 features"),
        ("threshold", float("nan"), r"\.nodes\[{i}\]\.threshold: split threshold nan is not a number"),
        ("n_node_samples", -5, r"\.nodes\[{i}\]: has a negative or undefined sample count"),
    ],
)
def test_a_corrupt_root_cause_tree_is_refused(rca_dict: dict[str, Any], field: str, value: Any, message: str) -> None:
    data = json_copy(rca_dict)
    i = _split_node(data)
    data["nodes"][field][i] = value
    with pytest.raises(StateError, match=r"estimator\.tree_\.tree_" + message.format(i=i)):
        from_state(*_rca_state(data))


def test_a_root_cause_leaf_with_one_child_is_refused(rca_dict: dict[str, Any]) -> None:
    data = json_copy(rca_dict)
    leaf = data["nodes"]["left_child"].index(-1)
    data["nodes"]["right_child"][leaf] = len(data["nodes"]["left_child"]) - 1
    with pytest.raises(StateError, match=rf"\.nodes\[{leaf}\]: has one child"):
        from_state(*_rca_state(data))


def test_a_root_cause_value_array_of_the_wrong_shape_is_refused(rca_dict: dict[str, Any]) -> None:
    data = json_copy(rca_dict)
    data["values"] = [[*row, [0.0]] for row in data["values"]]  # (nodes, 2, classes): a second output
    with pytest.raises(StateError, match="malformed state"):
        from_state(*_rca_state(data))


def json_copy(data: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(data))  # type: ignore[no-any-return]


def test_a_corrupt_tree_inside_a_profiled_root_cause_model_is_refused(rca_dict: dict[str, Any]) -> None:
    from models.rca_profiled import FORMAT, ProfiledRca

    good = {"name": "everything", "absent": [], "description": "all"}
    data = {"format": FORMAT, "profiles": [good], "models": {"everything": rca_dict}, "reach": {}, "confused": {}}

    def state(model: dict[str, Any]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        encoder = Encoder()
        root = {
            "$": "object",
            "type": "models.rca_profiled.ProfiledRca",
            "state": {"model": encoder.value(model, "estimator.to_dict()")},
        }
        return {"format": STATE_FORMAT, "root": root}, encoder.arrays

    assert isinstance(from_state(*state(data)), ProfiledRca)
    bad = json_copy(data)
    i = _split_node(bad["models"]["everything"])
    bad["models"]["everything"]["nodes"]["feature"][i] = 99
    with pytest.raises(StateError, match=r"\.models\['everything'\]\.tree_\.tree_\.nodes\[\d+\]\.feature: 99"):
        from_state(*state(bad))
