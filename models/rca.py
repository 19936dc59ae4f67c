"""Root-cause decision tree over symptom features: ranked causes, probabilities and the path in words.

A single, shallow, pruned tree rather than a forest because the answer has to be *explained* to the person
paging through a slow job: every prediction comes with the conditions it passed, measured values included
("gpu_temp_p95_max = 91 °C > 86.5 and sm_clock_drop_max = 31 % > 12 % → gpu_thermal", worded by
``models.rca_explain``). Classes are balanced (faults are rare next to healthy windows), depth is capped (16:
node and queue candidates share one tree, and a shallower cap left leaves that mix them), and the
cost-complexity pruning strength is chosen by stratified cross-validation on macro-F1. Balancing is for
choosing splits, not for answering: a leaf where most training rows were healthy (or another class) but the
balanced weights make a rare cause win answers with its rows' own mix instead (``_by_base_rate``), so the
cause ranks there without being named on every quiet window that lands in it.

Missing data are unknown, not evidence: at a split on a feature that is NaN (a series not scraped here),
prediction follows *both* branches, weighted by the training samples that went each way (C4.5's rule),
instead of scikit-learn's learned side for NaN. A class reached only through unmeasured splits is thereby
averaged with its siblings and loses probability, and ``measured_share`` says how much of the answer
rests on measured values; ``unmeasured`` names the features it does not.

Averaging is a poor answer when a whole metric family is absent and the main tree's deciding split reads it
(no TCP retransmit counters: every congestion leaf sits behind them). For each group in ``reduced`` (the
features one metric family feeds) a second tree is fitted with that group blanked on every row, at the main
tree's pruning strength: it has learned what the *other* families say. A row with most of a group unmeasured
is answered by that group's tree (the one covering most of its unknowns), so the answer rests on what was
measured, never on the absence itself; anything else still unknown is averaged as above.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedKFold
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils.multiclass import unique_labels
from sklearn.utils.validation import check_is_fitted, validate_data

from models.rca_explain import explain_path

__all__ = ["CAUSES", "CLASSES", "FORMAT", "HEALTHY", "INSUFFICIENT", "MIN_MEASURED", "RootCauseTree", "top_k_accuracy"]

HEALTHY = "healthy"
INSUFFICIENT = "insufficient_data"  # the answer when a fault's evidence rests on what was not measured
MIN_MEASURED = 0.5  # below this share of measured evidence a candidate's fault is not a finding
CAUSES = (
    "gpu_thermal",
    "gpu_power_cap",
    "gpu_hardware",
    "nvlink",
    "gpu_oom",
    "network_congestion",
    "io_stall",
    "cpu_contention",
    "scheduling_starvation",
    "node_not_ready",
    "roce_pfc_storm",
    "roce_congestion",
    "nic_link_flap",
)
CLASSES = (*CAUSES, HEALTHY)
FORMAT = "gpu-rca-tree/1"


class RootCauseTree(ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """Class-balanced, depth-limited decision tree, pruned by cross-validated cost-complexity."""

    def __init__(
        self,
        max_depth: int = 16,
        min_samples_leaf: int = 3,
        cv: int = 5,
        n_alphas: int = 12,
        random_state: int = 0,
        reduced: tuple[tuple[str, ...], ...] = (),
    ) -> None:
        self.reduced = reduced
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.cv = cv
        self.n_alphas = n_alphas
        self.random_state = random_state

    def _tree(self, alpha: float) -> DecisionTreeClassifier:
        return DecisionTreeClassifier(
            class_weight="balanced",
            max_depth=self.max_depth,
            min_samples_leaf=self.min_samples_leaf,
            ccp_alpha=alpha,
            random_state=self.random_state,
        )

    def fit(self, X: Any, y: Any) -> RootCauseTree:
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", dtype=np.float64)
        self.classes_ = unique_labels(y)
        alphas = self._candidate_alphas(X, y)
        self.cv_scores_ = {float(a): self._cv_score(X, y, a) for a in alphas}
        # The best-scoring alpha (ties: the larger, simpler tree). A one-SE style tolerance pruned leaves that
        # mix node and queue candidates, whose macro-F1 cost hides in CV but not on held-out families.
        best = max(self.cv_scores_.values())
        self.ccp_alpha_ = max(a for a, s in self.cv_scores_.items() if s >= best)
        self.tree_ = _by_base_rate(self._tree(self.ccp_alpha_).fit(X, y), X, y)
        self.blind_: tuple[str, ...] = ()  # causes left out of every answer (set by ``models.rca_profiled``)
        names = [str(n) for n in getattr(self, "feature_names_in_", [])]
        self.reduced_: list[_Reduced] = []
        for group in sorted((g for g in self.reduced if set(g) & set(names)), key=len):
            cols = np.array(sorted(names.index(n) for n in set(group) & set(names)), dtype=np.intp)
            blank = X.copy()
            blank[:, cols] = np.nan
            fitted = self._tree(self.ccp_alpha_).fit(blank, y)
            unsure = _unsure_leaves(fitted, blank, y)
            self.reduced_.append(_Reduced(cols, fitted, unsure, _cannot_tell(fitted, blank, y, unsure)))
        return self

    def _candidate_alphas(self, X: np.ndarray, y: np.ndarray) -> list[float]:
        path = self._tree(0.0).cost_complexity_pruning_path(X, y)
        alphas = np.unique(path.ccp_alphas[:-1]) if len(path.ccp_alphas) > 1 else np.array([0.0])
        if len(alphas) > self.n_alphas:
            alphas = np.unique(np.quantile(alphas, np.linspace(0, 1, self.n_alphas)))
        return [0.0, *[float(a) for a in alphas if a > 0]]

    def _cv_score(self, X: np.ndarray, y: np.ndarray, alpha: float) -> float:
        counts = np.unique(y, return_counts=True)[1]
        folds = int(min(self.cv, counts.min()))
        if folds < 2 or len(counts) < 2:
            return 0.0
        scores = []
        for train, test in StratifiedKFold(folds, shuffle=True, random_state=self.random_state).split(X, y):
            pred = self._tree(alpha).fit(X[train], y[train]).predict(X[test])
            scores.append(f1_score(y[test], pred, average="macro", zero_division=0))
        return float(np.mean(scores))

    def _check(self, X: Any) -> np.ndarray:
        check_is_fitted(self)
        checked: np.ndarray = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
        return checked

    def _pick(self, data: np.ndarray) -> np.ndarray:
        """Per row, which tree answers: -1 the main tree, else the index of the reduced tree whose blanked
        group covers most of the row's unmeasured features (at least half of that group unmeasured)."""
        which = np.full(len(data), -1)
        best = np.zeros(len(data))
        nan = ~np.isfinite(data)
        for k, (cols, *_) in enumerate(getattr(self, "reduced_", [])):
            cover = nan[:, cols].sum(axis=1).astype(np.float64)
            better = (2 * cover >= len(cols)) & (cover > best)  # groups sorted by size: ties keep the smaller
            which[better], best[better] = k, cover[better]
        return which

    def cannot_tell(self, X: Any) -> list[tuple[str, ...]]:
        """Per row, the causes the tree that answers it cannot diagnose (empty unless a family is missing)."""
        reduced = getattr(self, "reduced_", [])
        return [reduced[k].cannot_tell if k >= 0 else () for k in self._pick(self._check(X))]

    def left_out(self, X: Any) -> list[tuple[str, ...]]:
        """Per row, every cause out of its answering tree's answers (``_out_of``)."""
        reduced = getattr(self, "reduced_", [])
        return [self._out_of(k, reduced[k].cannot_tell if k >= 0 else ()) for k in self._pick(self._check(X))]

    def _out_of(self, k: int, own: tuple[str, ...]) -> tuple[str, ...]:
        """The causes out of tree ``k``'s answers (-1: the main tree): those it cannot diagnose itself (``own``)
        and those a profile leaves out of it (``models.rca_profiled``): ``blind_`` for the main tree, and for
        the reduced trees, whose answers were not measured, ``blind_reduced_``."""
        blind_main = getattr(self, "blind_", ())
        return (*own, *(blind_main if k < 0 else getattr(self, "blind_reduced_", blind_main)))

    def _walk(self, data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(class probabilities, share of weight that crossed no unmeasured split, weight per feature that met
        the feature unmeasured at a split), marginalising over NaN features, each row through its tree.

        A reduced tree's leaf that names a cause its own training rows mostly did not have (the class won
        only by class balancing: without the blanked family the cause looks like something else) is not
        measured evidence: its weight counts against ``measured_share`` and towards the blanked features."""
        which = self._pick(data)
        proba = np.zeros((len(data), len(self.classes_)))
        measured = np.zeros(len(data))
        unknown = np.zeros(data.shape)
        main = _Reduced(np.zeros(0, dtype=np.intp), self.tree_, np.zeros(self.tree_.tree_.node_count, dtype=bool))
        for k, (cols, tree, unsure, own) in enumerate([main, *getattr(self, "reduced_", [])], start=-1):
            blind = self._out_of(k, own)
            rows = which == k
            if not rows.any():
                continue
            # A cause this tree cannot diagnose is out of its answers (named by ``cannot_tell`` instead): its
            # leaves' other classes are what was measured, so they are not doubtful either.
            out = np.isin(self.classes_, blind)
            leaf_class = self.classes_[np.argmax(tree.tree_.value[:, 0, :], axis=1)]
            p, m, u, doubt = _walk_tree(tree.tree_, data[rows], unsure & ~np.isin(leaf_class, blind))
            if out.any():
                p[:, out] = 0.0
                rest = p.sum(axis=1)
                p[rest <= 0, list(self.classes_).index(HEALTHY) if HEALTHY in self.classes_ else 0] = 1.0
                p /= p.sum(axis=1, keepdims=True)
            u[:, cols] += doubt[:, None]
            proba[rows], measured[rows], unknown[rows] = p, m, u
        return proba, measured, unknown

    def predict_proba(self, X: Any) -> np.ndarray:
        return self._walk(self._check(X))[0]

    def predict(self, X: Any) -> np.ndarray:
        proba = self.predict_proba(X)
        pred: np.ndarray = self.classes_[np.argmax(proba, axis=1)]
        return pred

    def measured_share(self, X: Any) -> np.ndarray:
        """Per row, the share of the answer reached through measured splits only (1: nothing unknown)."""
        return self._walk(self._check(X))[1]

    def unmeasured(self, X: Any, min_weight: float = 0.05) -> list[list[str]]:
        """Per row, the features the answer needed but that were not measured (NaN), most weight first."""
        data = self._check(X)
        unknown = self._walk(data)[2]
        names = [str(n) for n in getattr(self, "feature_names_in_", [f"x{i}" for i in range(data.shape[1])])]
        return [[names[j] for j in np.argsort(-row, kind="stable") if row[j] >= min_weight] for row in unknown]

    def rank(self, X: Any, k: int = 3) -> list[list[tuple[str, float]]]:
        """Per row, the ``k`` most probable classes with their probabilities, best first."""
        proba = self.predict_proba(X)
        order = np.argsort(-proba, axis=1, kind="stable")[:, :k]
        return [[(str(self.classes_[j]), float(p[j])) for j in row] for p, row in zip(proba, order, strict=True)]

    def explain(self, X: Any) -> list[str]:
        """Per row, the decision path in words with the measured values, ending in the predicted class."""
        data = self._check(X)
        names = [str(n) for n in getattr(self, "feature_names_in_", [f"x{i}" for i in range(data.shape[1])])]
        reduced = getattr(self, "reduced_", [])
        out = []
        for row, pred, k in zip(data, self.predict(X), self._pick(data), strict=True):
            tree = (self.tree_ if k < 0 else reduced[k].tree).tree_
            blanked = None if k < 0 else [names[j] for j in reduced[k].columns if not np.isfinite(row[j])]
            out.append(explain_path(tree, row, names, str(pred), blanked))
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe description of the fitted trees (loading it runs no code, unlike a pickle)."""
        check_is_fitted(self)
        params = self.get_params()
        params["reduced"] = [list(g) for g in self.reduced]
        return {
            "format": FORMAT,
            "params": params,
            "ccp_alpha": self.ccp_alpha_,
            "cv_scores": {str(k): v for k, v in self.cv_scores_.items()},
            "classes": [str(c) for c in self.classes_],
            "feature_names": [str(n) for n in getattr(self, "feature_names_in_", [])],
            "n_features": int(self.n_features_in_),
            **_tree_state(self.tree_),
            "blind": list(getattr(self, "blind_", ())),
            "reduced": [
                {
                    "columns": r.columns.tolist(),
                    "unsure": np.flatnonzero(r.unsure).tolist(),
                    "cannot_tell": list(r.cannot_tell),
                    **_tree_state(r.tree),
                }
                for r in getattr(self, "reduced_", [])
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RootCauseTree:
        """Rebuild a fitted model from ``to_dict`` output; raises ValueError on anything unexpected."""
        if data.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} model (format {data.get('format')!r})")
        try:
            params = dict(data["params"])
            params["reduced"] = tuple(tuple(str(n) for n in g) for g in params.get("reduced", ()))
            model = cls(**params)
            classes = np.array(data["classes"], dtype=object)
            n_features = int(data["n_features"])
            alpha = float(data["ccp_alpha"])
            model.tree_ = _tree_from_state(model._tree(alpha), data, classes, n_features)
            model.reduced_ = []
            for r in data.get("reduced", []):
                tree = _tree_from_state(model._tree(alpha), r, classes, n_features)
                unsure = np.zeros(tree.tree_.node_count, dtype=bool)
                unsure[np.asarray(r["unsure"], dtype=np.intp)] = True
                model.reduced_.append(
                    _Reduced(
                        np.asarray(r["columns"], dtype=np.intp),
                        tree,
                        unsure,
                        tuple(str(c) for c in r.get("cannot_tell", [])),
                    )
                )
        except KeyError as exc:  # its text is the bare key: say that the key is missing
            raise ValueError(f"malformed {FORMAT} model: no {exc} field") from exc
        except (TypeError, ValueError) as exc:
            raise ValueError(f"malformed {FORMAT} model: {exc}") from exc
        model.classes_, model.n_features_in_ = classes, n_features
        model.ccp_alpha_ = alpha
        model.blind_ = tuple(str(c) for c in data.get("blind", []))
        model.cv_scores_ = {float(k): float(v) for k, v in data.get("cv_scores", {}).items()}
        if data.get("feature_names"):
            model.feature_names_in_ = np.array(data["feature_names"], dtype=object)
        return model

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags


class _Reduced(NamedTuple):
    columns: np.ndarray  # the blanked features' column indices
    tree: DecisionTreeClassifier
    unsure: np.ndarray  # per node: a leaf whose class is not what most of its training rows were
    cannot_tell: tuple[str, ...] = ()  # causes this tree cannot diagnose (their evidence is the blanked family)


def _cannot_tell(fitted: DecisionTreeClassifier, X: np.ndarray, y: np.ndarray, unsure: np.ndarray) -> tuple[str, ...]:
    """Causes fewer than half of whose own training rows reach a sure leaf of that cause: without the blanked
    family they look like something else, so the tree cannot diagnose them (said, and scored apart)."""
    leaf = fitted.apply(X)
    answer = fitted.classes_[np.argmax(fitted.tree_.value[:, 0, :], axis=1)]
    right = (answer[leaf] == y) & ~unsure[leaf]
    return tuple(str(c) for c in fitted.classes_ if c != HEALTHY and right[y == c].mean() < 0.5)


def _unsure_leaves(fitted: DecisionTreeClassifier, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per node of ``fitted``, whether it is a leaf whose (class-balanced) answer is a class that fewer than
    half of the training rows reaching it had: a cause the tree cannot tell from its neighbours."""
    tree = fitted.tree_
    leaf = fitted.apply(X)
    codes = np.searchsorted(fitted.classes_, y)
    counts = np.zeros((tree.node_count, len(fitted.classes_)))
    np.add.at(counts, (leaf, codes), 1.0)
    answer = np.argmax(tree.value[:, 0, :], axis=1)
    share = counts[np.arange(tree.node_count), answer] / np.maximum(counts.sum(axis=1), 1.0)
    return np.asarray((tree.children_left == -1) & (share < 0.5) & (fitted.classes_[answer] != HEALTHY))


def _by_base_rate(fitted: DecisionTreeClassifier, X: np.ndarray, y: np.ndarray) -> DecisionTreeClassifier:
    """``fitted`` with each leaf that names a cause only through class balancing (``_unsure_leaves``: most of
    its training rows were something else, e.g. 134 healthy to 14 NVLink rows) answering with its rows' own
    class mix instead, so the most likely class there is what most of them were.

    Why: balancing lets rare causes win splits, but such a leaf is a patch of ordinary windows with a few
    faults in it; at the balanced weights (a fault row counts ~40 healthy ones) a quiet cluster whose
    windows land there is blamed on that cause every time (held-out tight-quota: 47 healthy rows named
    nvlink). The cause keeps its share of the probability, so it still ranks among the answers."""
    unsure = _unsure_leaves(fitted, X, y)
    if not unsure.any():
        return fitted
    codes = np.searchsorted(fitted.classes_, y)
    counts = np.zeros((fitted.tree_.node_count, len(fitted.classes_)))
    np.add.at(counts, (fitted.apply(X), codes), 1.0)
    state = fitted.tree_.__getstate__()
    values = np.array(state["values"], dtype=np.float64)
    values[unsure, 0, :] = counts[unsure] / np.maximum(counts[unsure].sum(axis=1, keepdims=True), 1.0)
    fitted.tree_.__setstate__({**state, "values": values})
    return fitted


def _tree_state(fitted: DecisionTreeClassifier) -> dict[str, Any]:
    state = fitted.tree_.__getstate__()
    nodes = state["nodes"]
    return {
        "max_depth": int(state["max_depth"]),
        "nodes": {name: nodes[name].tolist() for name in nodes.dtype.names},
        "values": state["values"].tolist(),
    }


def _tree_from_state(
    inner: DecisionTreeClassifier, data: dict[str, Any], classes: np.ndarray, n_features: int
) -> DecisionTreeClassifier:
    """An unfitted scikit-learn tree given the fitted state ``_tree_state`` wrote (KeyError/ValueError if bad)."""
    from sklearn.tree._tree import NODE_DTYPE, Tree

    fields = data["nodes"]
    nodes = np.zeros(len(fields["left_child"]), dtype=NODE_DTYPE)
    for name in NODE_DTYPE.names:
        nodes[name] = fields[name]
    values = np.asarray(data["values"], dtype=np.float64)
    tree = Tree(n_features, np.array([len(classes)], dtype=np.intp), 1)
    tree.__setstate__({"max_depth": int(data["max_depth"]), "node_count": len(nodes), "nodes": nodes, "values": values})
    inner.tree_, inner.classes_, inner.n_classes_ = tree, classes, len(classes)
    inner.n_outputs_, inner.n_features_in_, inner.max_features_ = 1, n_features, n_features
    return inner


def _walk_tree(
    tree: Any, data: np.ndarray, unsure: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``RootCauseTree._walk`` for one scikit-learn ``Tree``, plus the weight reaching ``unsure`` leaves (not
    counted as measured). Rows in chunks: memory stays ``chunk × nodes``."""
    left, right, feature = tree.children_left, tree.children_right, tree.feature
    weights = tree.weighted_n_node_samples
    values = tree.value[:, 0, :]
    values = values / np.maximum(values.sum(axis=1, keepdims=True), 1e-300)
    n = len(data)
    proba = np.zeros((n, values.shape[1]))
    measured = np.zeros(n)
    unknown = np.zeros((n, data.shape[1]))
    doubt = np.zeros(n)
    for lo in range(0, n, 4096):
        x = data[lo : lo + 4096]
        w = np.zeros((len(x), tree.node_count))
        clean = np.zeros_like(w)
        w[:, 0] = clean[:, 0] = 1.0
        for node in range(tree.node_count):  # children always have larger ids than their parent
            a, b = left[node], right[node]
            if a == -1:
                continue
            v = x[:, feature[node]]
            nan = ~np.isfinite(v)
            share = weights[a] / max(weights[node], 1e-300)
            go = np.where(nan, share, (v <= tree.threshold[node]).astype(np.float64))
            w[:, a] += w[:, node] * go
            w[:, b] += w[:, node] * (1 - go)
            clean[:, a] += clean[:, node] * np.where(nan, 0.0, go)
            clean[:, b] += clean[:, node] * np.where(nan, 0.0, 1 - go)
            unknown[lo : lo + 4096, feature[node]] += w[:, node] * nan
        leaves = left == -1
        proba[lo : lo + 4096] = w[:, leaves] @ values[leaves]
        measured[lo : lo + 4096] = clean[:, leaves & ~unsure].sum(axis=1)
        doubt[lo : lo + 4096] = w[:, leaves & unsure].sum(axis=1)
    return proba / np.maximum(proba.sum(axis=1, keepdims=True), 1e-300), measured, unknown, doubt


def top_k_accuracy(model: RootCauseTree, X: pd.DataFrame, y: np.ndarray, k: int) -> float:
    """Share of rows whose true class is among the ``k`` most probable."""
    ranked = model.rank(X, k)
    return float(np.mean([t in {c for c, _ in r} for t, r in zip(y, ranked, strict=True)]))
