"""Structural checks of rebuilt estimators: a state that decodes must also be safe to predict with.

Why: ``models.state`` only rebuilds data, but some of that data is read by compiled code that trusts it.
scikit-learn's tree predictors walk node arrays without bounds checks: a child index past the last node,
a feature index past the input's columns, or a cycle of children is a segmentation fault (or a loop that
never ends) in ``predict``, long after the model loaded. The registry's digest proves the files are the
ones registered, not that their writer was honest, so every tree is checked here, when it is rebuilt:
dtypes exactly as the compiled code expects, every index in range, children after their parent (the
order both tree builders write, which also rules out cycles), thresholds that are numbers and finite leaf
values. (A threshold of +inf is legitimate: both builders write it for a split that sends only the
missing values one way.)

Each check raises ``StateCheckError`` naming the array it refused relative to the object checked
(``.nodes[7].left``); ``models.state`` prefixes where that object sits in the estimator. Checks run on the
object after it is rebuilt and before anything else can use it. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from models.state_base import StateCheckError

__all__ = [
    "check_bin_mapper",
    "check_demand_regressor",
    "check_hist_gradient_boosting",
    "check_lstm",
    "check_rca",
    "check_rca_profiled",
    "check_sklearn_tree",
    "check_tree_predictor",
]


def _array(value: Any, where: str, dtype: Any, ndim: int) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise StateCheckError(where, f"is a {type(value).__name__}, not an array")
    if value.dtype != np.dtype(dtype) or value.ndim != ndim:
        raise StateCheckError(
            where, f"is {value.dtype}{list(value.shape)}, expected {np.dtype(dtype)} with {ndim} dims"
        )
    return value


def _count(value: Any, where: str, low: int = 0) -> int:
    if type(value) not in (int, np.int64, np.intp) or int(value) < low:
        raise StateCheckError(where, f"{value!r} is not an integer >= {low}")
    return int(value)


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _check_children(left: np.ndarray, right: np.ndarray, split: np.ndarray, where: str, n: int) -> None:
    """Split nodes point at two later nodes of the array (so every walk ends at a leaf, in bounds)."""
    index = np.arange(n)
    for name, child in (("left", left), ("right", right)):
        bad = split & ((child <= index) | (child >= n))
        if bad.any():
            i = _first(bad)
            raise StateCheckError(
                f"{where}[{i}].{name}",
                f"child {int(child[i])} of node {i} is outside ({i}, {n}) (out of the node array or a cycle)",
            )


# ------------------------------------------------------------------------ histogram gradient boosting
def check_tree_predictor(predictor: Any) -> None:
    """A ``TreePredictor`` whose compiled ``predict`` stays inside its arrays (features checked by the model)."""
    from sklearn.ensemble._hist_gradient_boosting.common import PREDICTOR_RECORD_DTYPE, X_BITSET_INNER_DTYPE

    nodes = vars(predictor).get("nodes")
    if not isinstance(nodes, np.ndarray) or nodes.dtype != PREDICTOR_RECORD_DTYPE or nodes.ndim != 1:
        found = f"{nodes.dtype}" if isinstance(nodes, np.ndarray) else type(nodes).__name__
        raise StateCheckError(".nodes", f"has the record layout {found}, not scikit-learn's predictor nodes")
    n = len(nodes)
    if n == 0:
        raise StateCheckError(".nodes", "is empty (a tree has at least its root)")
    for name in ("binned_left_cat_bitsets", "raw_left_cat_bitsets"):
        bitsets = _array(vars(predictor).get(name), f".{name}", X_BITSET_INNER_DTYPE, 2)
        if bitsets.shape[1] != 8:
            raise StateCheckError(f".{name}", f"has rows of {bitsets.shape[1]} words, expected 8")
    flags = {name: nodes[name] for name in ("is_leaf", "missing_go_to_left", "is_categorical")}
    for name, values in flags.items():
        if (values > 1).any():
            i = _first(values > 1)
            raise StateCheckError(f".nodes[{i}].{name}", f"is {int(values[i])}, not 0 or 1")
    split = flags["is_leaf"] == 0
    _check_children(nodes["left"].astype(np.int64), nodes["right"].astype(np.int64), split, ".nodes", n)
    if (split & (flags["is_categorical"] == 1)).any():
        i = _first(split & (flags["is_categorical"] == 1))
        raise StateCheckError(f".nodes[{i}].is_categorical", "categorical splits are not used by this project's models")
    bad = split & np.isnan(nodes["num_threshold"])
    if bad.any():
        raise StateCheckError(f".nodes[{_first(bad)}].num_threshold", "split threshold nan is not a number")
    bad = ~split & ~np.isfinite(nodes["value"])
    if bad.any():
        i = _first(bad)
        raise StateCheckError(f".nodes[{i}].value", f"leaf value {nodes['value'][i]} is not finite")


def _split_features(nodes: np.ndarray) -> np.ndarray:
    return np.asarray(nodes["feature_idx"][nodes["is_leaf"] == 0], dtype=np.int64)


def check_bin_mapper(mapper: Any) -> None:
    """A ``_BinMapper`` with no categorical features (so prediction builds no category bitsets)."""
    attrs = vars(mapper)
    thresholds = attrs.get("bin_thresholds_")
    if not isinstance(thresholds, list):
        raise StateCheckError(".bin_thresholds_", "is not a list of arrays")
    n = len(thresholds)
    for i, t in enumerate(thresholds):
        _array(t, f".bin_thresholds_[{i}]", np.float64, 1)
    categorical = _array(attrs.get("is_categorical_"), ".is_categorical_", np.uint8, 1)
    if categorical.shape != (n,):
        raise StateCheckError(".is_categorical_", f"has {categorical.size} entries for {n} features")
    if categorical.any():
        raise StateCheckError(f".is_categorical_[{_first(categorical != 0)}]", "categorical features are not used here")
    bins = _array(attrs.get("n_bins_non_missing_"), ".n_bins_non_missing_", np.uint32, 1)
    if bins.shape != (n,):
        raise StateCheckError(".n_bins_non_missing_", f"has {bins.size} entries for {n} features")


def check_hist_gradient_boosting(model: Any) -> None:
    """A fitted ``HistGradientBoostingRegressor`` whose trees only read the columns its input has."""
    attrs = vars(model)
    if attrs.get("_in_fit") is not None:
        raise StateCheckError("._in_fit", "marks a model in the middle of fit (predict would read binned data)")
    if attrs.get("_preprocessor") is not None or attrs.get("is_categorical_") is not None:
        raise StateCheckError("._preprocessor", "categorical preprocessing is not used by this project's models")
    n_features = _count(attrs.get("n_features_in_"), ".n_features_in_", 1)
    per_iteration = _count(attrs.get("n_trees_per_iteration_"), ".n_trees_per_iteration_", 1)
    mapper = attrs.get("_bin_mapper")
    thresholds = vars(mapper).get("bin_thresholds_") if hasattr(mapper, "__dict__") else None
    if not isinstance(thresholds, list) or len(thresholds) != n_features:
        found = len(thresholds) if isinstance(thresholds, list) else "no"
        raise StateCheckError("._bin_mapper", f"bins {found} features, the model reads {n_features}")
    baseline = _array(attrs.get("_baseline_prediction"), "._baseline_prediction", np.float64, 2)
    if baseline.shape != (1, per_iteration) or not np.isfinite(baseline).all():
        raise StateCheckError("._baseline_prediction", f"is {list(baseline.shape)} or not finite")
    predictors = attrs.get("_predictors")
    if not isinstance(predictors, list):
        raise StateCheckError("._predictors", "is not a list of iterations")
    from sklearn.ensemble._hist_gradient_boosting.predictor import TreePredictor

    for i, trees in enumerate(predictors):
        if not isinstance(trees, list) or len(trees) != per_iteration:
            raise StateCheckError(f"._predictors[{i}]", f"does not hold {per_iteration} tree(s)")
        for k, tree in enumerate(trees):
            if type(tree) is not TreePredictor:
                raise StateCheckError(f"._predictors[{i}][{k}]", f"is a {type(tree).__name__}, not a TreePredictor")
            features = _split_features(tree.nodes)
            bad = (features < 0) | (features >= n_features)
            if bad.any():
                split_at = np.flatnonzero(tree.nodes["is_leaf"] == 0)[_first(bad)]
                raise StateCheckError(
                    f"._predictors[{i}][{k}].nodes[{split_at}].feature_idx",
                    f"feature {int(features[_first(bad)])} is outside the model's {n_features} features",
                )


def check_demand_regressor(model: Any) -> None:
    """A fitted ``DemandRegressor``: its mask of empty features and its booster agree on the input width."""
    attrs = vars(model)
    if "model_" not in attrs:
        return  # not fitted: predict refuses by itself (check_is_fitted)
    from sklearn.ensemble import HistGradientBoostingRegressor

    booster = attrs["model_"]
    if type(booster) is not HistGradientBoostingRegressor:
        raise StateCheckError(".model_", f"is a {type(booster).__name__}, not a HistGradientBoostingRegressor")
    n_features = _count(attrs.get("n_features_in_"), ".n_features_in_", 1)
    if vars(booster).get("n_features_in_") != n_features:
        raise StateCheckError(".model_.n_features_in_", f"differs from the regressor's {n_features} features")
    empty = _array(attrs.get("empty_features_"), ".empty_features_", np.bool_, 1)
    if empty.shape != (n_features,):
        raise StateCheckError(".empty_features_", f"has {empty.size} entries for {n_features} features")
    threads = attrs.get("n_threads")
    if threads is not None and (type(threads) is not int or threads < 1):
        raise StateCheckError(".n_threads", f"{threads!r} is not a positive thread count")


# ------------------------------------------------------------------------ scikit-learn decision trees
def check_sklearn_tree(tree: Any, n_features: int, n_classes: int, where: str) -> None:
    """A ``sklearn.tree._tree.Tree`` (classifier, one output): in-range children and features, finite splits."""
    from sklearn.tree._tree import NODE_DTYPE, TREE_LEAF, TREE_UNDEFINED

    state = tree.__getstate__()
    nodes, values = state["nodes"], state["values"]
    n = int(state["node_count"])
    if nodes.dtype != NODE_DTYPE or nodes.shape != (n,) or n == 0:
        raise StateCheckError(f"{where}.nodes", f"is {nodes.dtype}{list(nodes.shape)} for {n} nodes")
    if values.shape != (n, 1, n_classes) or not np.isfinite(values).all():
        raise StateCheckError(f"{where}.value", f"is {list(values.shape)}, expected finite ({n}, 1, {n_classes})")
    left, right, feature = nodes["left_child"], nodes["right_child"], nodes["feature"]
    leaf = left == TREE_LEAF
    bad = leaf != (right == TREE_LEAF)
    if bad.any():
        raise StateCheckError(f"{where}.nodes[{_first(bad)}]", "has one child: a leaf has both children -1")
    _check_children(left, right, ~leaf, f"{where}.nodes", n)
    bad = ~leaf & ((feature < 0) | (feature >= n_features))
    if bad.any():
        i = _first(bad)
        raise StateCheckError(f"{where}.nodes[{i}].feature", f"{int(feature[i])} is outside the {n_features} features")
    bad = leaf & (feature != TREE_UNDEFINED)
    if bad.any():
        i = _first(bad)
        raise StateCheckError(f"{where}.nodes[{i}].feature", f"a leaf's feature is {int(feature[i])}, not -2")
    bad = ~leaf & np.isnan(nodes["threshold"])
    if bad.any():
        raise StateCheckError(f"{where}.nodes[{_first(bad)}].threshold", "split threshold nan is not a number")
    bad = (nodes["n_node_samples"] < 0) | ~(nodes["weighted_n_node_samples"] >= 0)
    if bad.any():
        raise StateCheckError(f"{where}.nodes[{_first(bad)}]", "has a negative or undefined sample count")
    if (nodes["missing_go_to_left"] > 1).any():
        raise StateCheckError(f"{where}.nodes[{_first(nodes['missing_go_to_left'] > 1)}].missing_go_to_left", "not 0/1")


def check_rca(model: Any) -> None:
    """A ``RootCauseTree``: its main tree and every reduced tree, with their column and node selections."""
    n_features = _count(vars(model).get("n_features_in_"), ".n_features_in_", 1)
    n_classes = len(model.classes_)
    check_sklearn_tree(model.tree_.tree_, n_features, n_classes, ".tree_.tree_")
    for i, reduced in enumerate(model.reduced_):
        columns = np.asarray(reduced.columns)
        if ((columns < 0) | (columns >= n_features)).any():
            raise StateCheckError(f".reduced_[{i}].columns", f"name a column outside the {n_features} features")
        check_sklearn_tree(reduced.tree.tree_, n_features, n_classes, f".reduced_[{i}].tree.tree_")


def check_rca_profiled(model: Any) -> None:
    """A ``ProfiledRca``: every profile's ``RootCauseTree`` (as ``check_rca``), each reading the same columns."""
    from models.rca import RootCauseTree

    models = vars(model).get("models")
    if not isinstance(models, dict) or not models:
        raise StateCheckError(".models", "is not a non-empty dict of trees")
    widths = set()
    for name, tree in models.items():
        if type(tree) is not RootCauseTree:
            raise StateCheckError(f".models[{name!r}]", f"is a {type(tree).__name__}, not a RootCauseTree")
        try:
            check_rca(tree)
        except StateCheckError as exc:
            raise StateCheckError(f".models[{name!r}]{exc.where}", exc.reason) from exc
        widths.add(int(tree.n_features_in_))
    if len(widths) != 1:
        raise StateCheckError(".models", f"trees read different numbers of features ({sorted(widths)})")


# ------------------------------------------------------------------------ torch network
def check_lstm(net: Any) -> None:
    """LSTM weights are finite (their shapes were checked by ``load_state_dict(strict=True)``)."""
    import torch

    for name, tensor in net.state_dict().items():
        if not bool(torch.isfinite(tensor).all()):
            raise StateCheckError(f".state_dict()[{name!r}]", "holds non-finite weights")
