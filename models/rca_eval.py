"""Fitting and judging the root-cause tree on labelled windows (pure: frames in, numbers out).

Shared by the bench, the training pipeline's promotion gate and the tests, so "macro-F1" means one thing
everywhere. Besides the per-class table and the confusion matrix it reports the two numbers an on-call
engineer feels: top-k accuracy (is the right cause among the first answers) and the false-alarm rate on
healthy windows (how often a quiet cluster gets blamed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.metrics import confusion_matrix, f1_score, precision_recall_fscore_support

from models.rca import CLASSES, HEALTHY, INSUFFICIENT, MIN_MEASURED, RootCauseTree, top_k_accuracy
from models.rca_features import FEATURE_NAMES, mark_not_applicable

__all__ = ["RcaReport", "answers", "augment_missing", "evaluate", "fit_rca"]


def augment_missing(rows: pd.DataFrame, groups: Sequence[Sequence[str]], share: float, seed: int = 0) -> pd.DataFrame:
    """``rows`` plus a copy of a random ``share`` of them with one random feature group set to NaN.

    Why: the tree should meet every metric family missing at random (so missingness carries no class
    information) and learn splits on what is still measured, instead of one learned side for NaN.
    """
    if share <= 0 or not groups:
        return rows
    rng = np.random.default_rng(seed)
    pick = rows.iloc[rng.choice(len(rows), int(share * len(rows)), replace=False)].copy()
    which = rng.integers(len(groups), size=len(pick))
    for g, cols in enumerate(groups):
        pick.loc[pick.index[which == g], list(cols)] = np.nan
    return pd.concat([rows, mark_not_applicable(pick)], ignore_index=True)


def fit_rca(
    rows: pd.DataFrame,
    *,
    min_strength: float = 0.0,
    model: RootCauseTree | None = None,
    missing_groups: Sequence[Sequence[str]] = (),
    missing_share: float = 0.0,
) -> RootCauseTree:
    """Fit on labelled rows (``FEATURE_NAMES`` + ``label``), leaving out faults weaker than ``min_strength``
    and adding ``missing_share`` copies with a feature group unmeasured (``augment_missing``). Each of the
    ``missing_groups`` also gets its own tree fitted without it (``RootCauseTree.reduced``), unless the
    given model already names its groups."""
    strength = rows["strength"] if "strength" in rows.columns else pd.Series(np.nan, index=rows.index)
    keep = (rows["label"] == HEALTHY) | strength.isna() | (strength >= min_strength)
    train = augment_missing(rows[keep], missing_groups, missing_share)
    model = model or RootCauseTree()
    if missing_groups and not model.reduced:
        model.set_params(reduced=tuple(tuple(g) for g in missing_groups))
    return model.fit(train[list(FEATURE_NAMES)], train["label"].to_numpy())


@dataclass
class RcaReport:
    """Scores of answered rows; a row whose fault rests mostly on unmeasured evidence is answered
    ``insufficient_data`` (as ``predictor diagnose`` does), scored apart and never counted as correct. Rows
    of a cause that the tree answering them cannot diagnose (its evidence is a missing family:
    ``RootCauseTree.cannot_tell``) are left out of every score but ``top1_strict`` and counted in
    ``undiagnosable``."""

    per_class: pd.DataFrame  # precision, recall, f1, support per class (answered rows)
    confusion: pd.DataFrame  # rows: true, columns: predicted (insufficient_data included)
    macro_f1: float
    top1: float
    top3: float
    false_alarm_rows: float  # healthy candidates blamed on a cause
    false_alarm_windows: float  # all-healthy windows with at least one candidate blamed
    n_rows: int
    insufficient: float = 0.0  # share of rows answered insufficient_data
    insufficient_by_class: pd.Series = field(default_factory=lambda: pd.Series(dtype=np.float64))
    top1_strict: float = float("nan")  # top-1 over all rows, insufficient_data counted wrong
    undiagnosable: pd.Series = field(default_factory=lambda: pd.Series(dtype=np.float64))  # rows per cause

    def metrics(self) -> dict[str, float]:
        return {
            "macro_f1": self.macro_f1,
            "top1_accuracy": self.top1,
            "top3_accuracy": self.top3,
            "false_alarm_rate": self.false_alarm_rows,
            "false_alarm_window_rate": self.false_alarm_windows,
            "insufficient_rate": self.insufficient,
            "top1_strict": self.top1_strict,
        }


def answers(model: RootCauseTree, X: pd.DataFrame, min_measured: float = MIN_MEASURED) -> np.ndarray:
    """Per row the class ``predictor diagnose`` would give: the most probable one, or ``insufficient_data``
    for a fault whose answer rests mostly on unmeasured evidence."""
    pred = model.predict(X).astype(object)
    unsure = (model.measured_share(X) < min_measured) & (pred != HEALTHY)
    return np.where(unsure, INSUFFICIENT, pred)


def evaluate(model: RootCauseTree, rows: pd.DataFrame, min_measured: float = MIN_MEASURED) -> RcaReport:
    """Score ``model`` on labelled rows; windows are grouped by ``scenario`` and ``at`` when present. Rows of a
    cause out of the answering tree's answers (``model.left_out``) are scored apart, as ``undiagnosable``."""
    X, y = rows[list(FEATURE_NAMES)], rows["label"].to_numpy()
    shown = answers(model, X, min_measured)
    unsure = shown == INSUFFICIENT
    pred = np.where(unsure, model.predict(X).astype(object), shown)
    apart = np.array([t in c for t, c in zip(y, model.left_out(X), strict=True)], dtype=bool)
    answered = ~unsure & ~apart
    ya, pa = y[answered], pred[answered]
    labels = [c for c in CLASSES if c in set(ya) | set(pa)]
    p, r, f, s = precision_recall_fscore_support(ya, pa, labels=labels, zero_division=0)
    per_class = pd.DataFrame({"precision": p, "recall": r, "f1": f, "support": s}, index=labels)
    present = [c for c in labels if c in set(ya)]
    every = [c for c in CLASSES if c in set(y) | set(shown)] + ([INSUFFICIENT] if unsure.any() else [])
    confusion = pd.DataFrame(confusion_matrix(y, shown, labels=every), index=every, columns=every)
    confusion = confusion.loc[[c for c in every if c in set(y)]]
    healthy = y == HEALTHY
    blamed = (pred != HEALTHY) & answered
    windows = [c for c in ("scenario", "at") if c in rows.columns]
    if windows:
        per_window = (
            pd.DataFrame({"clean": healthy, "blamed": blamed})
            .groupby([rows[c].to_numpy() for c in windows])
            .agg(clean=("clean", "all"), blamed=("blamed", "any"))
        )
        clean = per_window[per_window["clean"]]
        window_rate = float(clean["blamed"].mean()) if len(clean) else float("nan")
    else:
        window_rate = float("nan")
    return RcaReport(
        per_class=per_class,
        confusion=confusion,
        macro_f1=float(f1_score(ya, pa, labels=present, average="macro", zero_division=0)) if present else float("nan"),
        top1=float(np.mean(pa == ya)) if len(ya) else float("nan"),
        top3=top_k_accuracy(model, X, y, 3),
        false_alarm_rows=float(blamed[healthy].mean()) if healthy.any() else float("nan"),
        false_alarm_windows=window_rate,
        n_rows=len(rows),
        insufficient=float(unsure.mean()),
        insufficient_by_class=pd.Series(unsure[~apart]).groupby(y[~apart]).mean(),
        top1_strict=float(np.mean(shown == y)),
        undiagnosable=pd.Series(y[apart]).value_counts(),
    )
