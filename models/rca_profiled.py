"""One root-cause tree per metric-family profile, and which causes each profile can diagnose at all.

A single tree fitted on every family reads the clock-throttle reasons, ECC and NVLink error counters on its
paths, so on a default dcgm-exporter (which ships them commented out) nearly every answer rests on
unmeasured splits and comes out ``insufficient_data``. ``fit_profiled`` fits one ``RootCauseTree`` per
profile (``models.rca_profiles``) with the profile's absent features blanked on every training row, so no
split of that tree reads them: a window is answered from what its site exports, and ``for_present`` picks the
tree by the families a window's queries returned.

Some causes leave no trace outside a family a profile lacks (an NVLink fault without the NVLink error
counters). For each profile the held-out recall of every cause is measured (``class_reach``, stratified folds
at the fitted pruning strength); a cause below ``MIN_REACH`` is "cannot tell in this profile", and
``needs`` names the families whose absence makes it so: those that the smallest richer profile in which the
cause is reachable reads on its paths to that cause. The held-out precision of the main tree's answers is
measured in the same folds: a cause the profile cannot tell is still answered by the main tree when those
answers were right often enough (``MIN_PRECISION``), never by its reduced trees (not measured).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.model_selection import StratifiedKFold

from models.rca import FORMAT as TREE_FORMAT
from models.rca import HEALTHY, RootCauseTree, _by_base_rate
from models.rca_eval import RcaReport, augment_missing, evaluate
from models.rca_evidence import evidence_families
from models.rca_features import FEATURE_NAMES
from models.rca_profiles import PROFILES, Profile, profile_for
from models.rca_specs import METRIC_FAMILIES, SPECS, features_of_family

__all__ = [
    "FORMAT",
    "MIN_NAMED",
    "MIN_PRECISION",
    "MIN_REACH",
    "ProfiledRca",
    "blank",
    "class_reach",
    "evaluate_profile",
    "fit_profiled",
    "path_families",
]

FORMAT = "gpu-rca-profiled/1"
# Held-out recall below which a cause is "cannot tell in this profile". Why not 0.5: a cause missed a third of
# the time is not one the profile tells, and naming the counters to enable is the useful answer (NVLink faults
# without the NVLink error counters: recall about 0.6 in the default profile).
MIN_REACH = 0.7
# A cause the profile cannot tell is still named where its tree is right when it names it: held-out precision at
# least this, over at least MIN_NAMED held-out answers. Why: NVLink faults on a default install show only
# through XID 74 when the driver reports one; in training folds the default profile's tree named nvlink on about
# 360 windows at precision 0.94 (15 healthy windows of 22,496), recall 0.57, while its RoCE answers were right
# 0-33 % of the time. Telling an operator "NVLink" on those windows is worth it; the counters to enable are still
# named for the rest. A precision from a handful of answers says nothing: such a cause stays out.
MIN_PRECISION = 0.9
MIN_NAMED = 30
_LEGACY = Profile("everything", frozenset(), "a single tree fitted on every family (an older model file)")
_FAMILIES_OF = {s.name: s.families for s in SPECS}
_LIFT = 1.5  # a split "singles out" a cause when its branch holds this many times the cause's share


def blank(rows: pd.DataFrame, profile: Profile) -> pd.DataFrame:
    """``rows`` with the features ``profile`` cannot measure set to NaN on every row (queue rows included)."""
    cols = [c for c in FEATURE_NAMES if c in profile.absent_features and c in rows.columns]
    return rows.assign(**{c: np.nan for c in cols}) if cols else rows


@dataclass
class ProfiledRca:
    """A root-cause tree per profile, and per profile the held-out reach of each cause."""

    models: dict[str, RootCauseTree]
    profiles: dict[str, Profile] = field(default_factory=dict)
    reach: dict[str, dict[str, float]] = field(default_factory=dict)  # profile → cause → held-out recall
    confused: dict[str, dict[str, str]] = field(default_factory=dict)  # profile → cause → its likeliest stand-in
    precision: dict[str, dict[str, float]] = field(default_factory=dict)  # profile → cause → held-out precision

    def __post_init__(self) -> None:
        unknown = set(self.models) - set(self.profiles)
        self.profiles.update({n: PROFILES.get(n, Profile(n, frozenset(), n)) for n in sorted(unknown)})
        self.leave_out_unreachable()

    def leave_out_unreachable(self) -> None:
        """Each tree leaves the causes its profile cannot tell out of its answers: their leaves are patches
        of other windows that class balancing handed to them, and would blame quiet windows on them. The main
        tree keeps those it names rightly (``named_when_sure``); its reduced trees, whose answers were not
        measured, leave them all out. Derived from ``reach`` and ``precision`` on every load, so it follows
        ``MIN_REACH`` and ``MIN_PRECISION``."""
        for name, tree in self.models.items():
            sure = self.named_when_sure(name)
            tree.blind_reduced_ = self.cannot_tell(name)
            tree.blind_ = tuple(c for c in tree.blind_reduced_ if c not in sure)

    @classmethod
    def of_tree(cls, tree: RootCauseTree) -> ProfiledRca:
        """A single tree fitted on every family (an older model) as a one-profile model."""
        return cls({_LEGACY.name: tree}, {_LEGACY.name: _LEGACY})

    def for_present(self, families: Iterable[str]) -> tuple[Profile, RootCauseTree]:
        """The profile a window with these families is diagnosed with, and its tree (``profile_for``'s rule
        over the profiles this model holds)."""
        profile = profile_for(families, self.profiles.values())
        return profile, self.models[profile.name]

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        """Classes of candidate rows (``FEATURE_NAMES``), from the tree of the profile their measured features
        select: a family counts as present when any feature it feeds is measured on any row (MLflow serving)."""
        measured = {c for c in FEATURE_NAMES if c in rows.columns and rows[c].notna().any()}
        present = {f for f in METRIC_FAMILIES if not features_of_family(f) or measured & set(features_of_family(f))}
        profile, tree = self.for_present(present)
        pred: np.ndarray = tree.predict(blank(rows, profile)[list(tree.feature_names_in_)])
        return pred

    def cannot_tell(self, profile: str) -> tuple[str, ...]:
        """Causes whose held-out recall in ``profile`` is below ``MIN_REACH`` (empty when not measured)."""
        return tuple(c for c, r in self.reach.get(profile, {}).items() if c != HEALTHY and r < MIN_REACH)

    def named_when_sure(self, profile: str) -> tuple[str, ...]:
        """Causes ``profile`` cannot tell that its main tree still names, its held-out answers of them having
        been right at least ``MIN_PRECISION`` of the time (none for a model file that did not measure it)."""
        precision = self.precision.get(profile, {})
        return tuple(c for c in self.cannot_tell(profile) if precision.get(c, 0.0) >= MIN_PRECISION)

    def needs(self, profile: str, cause: str) -> tuple[str, ...]:
        """The families ``profile`` lacks that would let it diagnose ``cause``: of those the smallest richer
        profile where the cause is reachable adds, the cause's own symptoms' (``models.rca_evidence``), else
        those its tree reads on the way to the cause, else all it adds."""
        mine = self.profiles[profile]
        richer = [
            p
            for p in self.profiles.values()
            if p.present > mine.present and self.reach.get(p.name, {}).get(cause, 0.0) >= MIN_REACH
        ]
        if not richer:
            return ()
        best = min(richer, key=lambda p: (len(p.present - mine.present), p.name))
        extra = best.present - mine.present
        # The cause's own symptoms first (a tree may split on a family that only correlates with it).
        evidence = [f for f in evidence_families(cause) if f in extra]
        return tuple(evidence) or tuple(sorted(path_families(self.models[best.name], cause) & extra or extra))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: every tree's own ``to_dict`` plus the profiles and reach it was fitted and measured for."""
        return {
            "format": FORMAT,
            "profiles": [
                {"name": p.name, "absent": sorted(p.absent), "description": p.description}
                for p in self.profiles.values()
                if p.name in self.models
            ],
            "models": {name: tree.to_dict() for name, tree in self.models.items()},
            "reach": self.reach,
            "confused": self.confused,
            "precision": self.precision,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProfiledRca:
        """Rebuild from ``to_dict`` output; a single-tree (``gpu-rca-tree/1``) dict loads as a one-profile
        model. Raises ValueError on anything unexpected."""
        if data.get("format") == TREE_FORMAT:
            return cls.of_tree(RootCauseTree.from_dict(dict(data)))
        if data.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} or {TREE_FORMAT} model (format {data.get('format')!r})")
        try:
            profiles = {
                str(p["name"]): Profile(str(p["name"]), frozenset(str(f) for f in p["absent"]), str(p["description"]))
                for p in data["profiles"]
            }
            models = {str(n): RootCauseTree.from_dict(dict(t)) for n, t in dict(data["models"]).items()}
            reach = {str(p): {str(c): float(r) for c, r in dict(v).items()} for p, v in dict(data["reach"]).items()}
            confused = {str(p): {str(c): str(o) for c, o in dict(v).items()} for p, v in dict(data["confused"]).items()}
            precision = _precision(data.get("precision", {}), models)
        except KeyError as exc:  # its text is the bare key: say that the key is missing
            raise ValueError(f"malformed {FORMAT} model: no {exc} field") from exc
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"malformed {FORMAT} model: {exc}") from exc
        if not models or set(models) != set(profiles):
            raise ValueError(f"malformed {FORMAT} model: its trees and profiles do not match")
        return cls(models, profiles, reach, confused, precision)


def _precision(data: Any, models: Mapping[str, RootCauseTree]) -> dict[str, dict[str, float]]:
    """The ``precision`` field of a model file, checked (absent from files written before it was measured:
    then every cause a profile cannot tell stays out of its answers)."""
    if not isinstance(data, Mapping) or not all(isinstance(v, Mapping) for v in data.values()):
        raise ValueError("precision must map each profile to {cause: held-out precision}")
    out: dict[str, dict[str, float]] = {}
    for profile, causes in data.items():
        if profile not in models:
            raise ValueError(f"precision names profile {profile!r}, which has no tree")
        values = {str(c): v for c, v in causes.items()}
        bad = [c for c, v in values.items() if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 1]
        if bad:
            raise ValueError(f"precision of {', '.join(bad)} in profile {profile!r} is not a number in [0, 1]")
        out[str(profile)] = {c: float(v) for c, v in values.items()}
    return out


def path_families(tree: RootCauseTree, cause: str, min_share: float = 0.0) -> frozenset[str]:
    """The metric families that single ``cause`` out on the main tree's paths to the leaves answering it:
    read at a split whose branch towards the leaf holds at least ``_LIFT`` times the cause's share of the
    node it splits (a split that only sorts queues from nodes, or other causes from each other, does not
    count), on the way to more than ``min_share`` of the cause's weight in such leaves (0: any of them)."""
    inner = tree.tree_.tree_
    names = [str(n) for n in tree.feature_names_in_]
    answer = tree.classes_[np.argmax(inner.value[:, 0, :], axis=1)]
    column = list(tree.classes_).index(cause) if cause in tree.classes_ else -1
    if column < 0:
        return frozenset()
    parent = np.full(inner.node_count, -1)
    for node in range(inner.node_count):
        for child in (inner.children_left[node], inner.children_right[node]):
            if child != -1:
                parent[child] = node
    values = inner.value[:, 0, :]
    share = values[:, column] / np.maximum(values.sum(axis=1), 1e-300)
    weight: dict[str, float] = {}
    leaves = np.flatnonzero((inner.children_left == -1) & (answer == cause))
    mass = inner.value[leaves, 0, column] * inner.weighted_n_node_samples[leaves]
    for leaf, w in zip(leaves, mass, strict=True):
        read: set[str] = set()
        below, node = leaf, parent[leaf]
        while node != -1:
            if share[below] >= _LIFT * share[node]:
                read.update(_FAMILIES_OF.get(names[inner.feature[node]], ()))
            below, node = node, parent[node]
        for family in read:
            weight[family] = weight.get(family, 0.0) + float(w)
    total = float(mass.sum())
    return frozenset(f for f, w in weight.items() if total > 0 and w / total > min_share)


def class_reach(
    tree: RootCauseTree, X: pd.DataFrame, y: np.ndarray, folds: int = 3
) -> tuple[dict[str, float], dict[str, str], dict[str, float]]:
    """Held-out recall per cause of trees like ``tree`` (its pruning strength, main tree only), for each
    cause the answer its rows most often get instead, and the held-out precision of its answers (0 when it
    was answered fewer than ``MIN_NAMED`` times). Stratified folds; a cause with a single row gets its
    training answer (no fold could hold it out)."""
    data = X[list(tree.feature_names_in_)].to_numpy(dtype=np.float64)
    pred = np.empty(len(y), dtype=object)
    counts = pd.Series(y).value_counts()
    k = int(min(folds, counts.max()))
    splitter = StratifiedKFold(max(k, 2), shuffle=True, random_state=tree.random_state)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a rare class in fewer folds than asked: said in the docstring
        for train, test in splitter.split(data, y):
            inner = _by_base_rate(tree._tree(tree.ccp_alpha_).fit(data[train], y[train]), data[train], y[train])
            pred[test] = inner.predict(data[test])
    rare = np.isin(y, counts.index[counts < 2])
    if rare.any():
        pred[rare] = tree.tree_.predict(data[rare])
    reach: dict[str, float] = {}
    confused: dict[str, str] = {}
    precision: dict[str, float] = {}
    for cause in sorted(set(y) - {HEALTHY}):
        mine = y == cause
        reach[str(cause)] = float(np.mean(pred[mine] == cause))
        named = pred == cause
        precision[str(cause)] = float(np.mean(mine[named])) if named.sum() >= MIN_NAMED else 0.0
        wrong = pd.Series(pred[mine & (pred != cause)]).value_counts()
        if len(wrong):
            confused[str(cause)] = str(wrong.index[0])
    return reach, confused, precision


def _train_rows(
    rows: pd.DataFrame, profile: Profile, min_strength: float, groups: Iterable[Iterable[str]], share: float
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the profile's own training rows, those plus the masked copies): absent features NaN on every row,
    also after ``augment_missing`` marks queue rows, so no split can read them."""
    strength = rows["strength"] if "strength" in rows.columns else pd.Series(np.nan, index=rows.index)
    keep = (rows["label"] == HEALTHY) | strength.isna() | (strength >= min_strength)
    own = blank(rows[keep], profile).reset_index(drop=True)
    return own, blank(augment_missing(own, [list(g) for g in groups], share), profile)


def fit_profiled(
    rows: pd.DataFrame,
    *,
    profiles: Mapping[str, Profile] | None = None,
    min_strength: float = 0.0,
    **fit_kwargs: Any,
) -> ProfiledRca:
    """One tree per profile on labelled rows (``FEATURE_NAMES`` + ``label``, as for ``fit_rca``), each with
    exactly the features its profile has, and each cause's held-out reach per profile.

    ``fit_kwargs`` are ``fit_rca``'s: ``model`` (cloned per profile), ``missing_groups`` and
    ``missing_share``; groups lose the profile's absent features (a family it never has needs no tree
    fitted without it)."""
    chosen = dict(profiles if profiles is not None else PROFILES)
    base: RootCauseTree = fit_kwargs.pop("model", None) or RootCauseTree()
    groups = [tuple(g) for g in fit_kwargs.pop("missing_groups", ())]
    share = float(fit_kwargs.pop("missing_share", 0.0))
    if fit_kwargs:
        raise TypeError(f"fit_profiled got unexpected arguments: {', '.join(sorted(fit_kwargs))}")
    out = ProfiledRca({}, {})
    for name, profile in chosen.items():
        absent = profile.absent_features
        kept = list(dict.fromkeys(k for k in (tuple(f for f in g if f not in absent) for g in groups) if k))
        model = clone(base)
        reduced = [tuple(f for f in g if f not in absent) for g in base.reduced] if base.reduced else kept
        model.set_params(reduced=tuple(dict.fromkeys(g for g in reduced if g)))
        own, train = _train_rows(rows, profile, min_strength, kept, share)
        out.models[name] = model.fit(train[list(FEATURE_NAMES)], train["label"].to_numpy())
        out.profiles[name] = profile
        out.reach[name], out.confused[name], out.precision[name] = class_reach(
            out.models[name], own, own["label"].to_numpy()
        )
    out.leave_out_unreachable()
    return out


def evaluate_profile(model: ProfiledRca, rows: pd.DataFrame, profile: str) -> RcaReport:
    """``rows`` scored as a site with ``profile`` sees them: its absent features NaN, its tree answering.
    A cause the answering tree leaves out is scored apart, as ``undiagnosable``: one the profile cannot tell,
    except where the main tree still names it (``ProfiledRca.named_when_sure``), whose answers are scored."""
    if profile not in model.models:
        raise ValueError(f"no tree for profile {profile!r} (the model has {', '.join(model.models)})")
    return evaluate(model.models[profile], blank(rows, model.profiles[profile]))
