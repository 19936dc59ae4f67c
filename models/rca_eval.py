"""Fitting and judging the root-cause tree on labelled windows (pure: frames in, numbers out).

Shared by the bench, the training pipeline's promotion gate and the tests, so "macro-F1" means one thing
everywhere. Besides the per-class table and the confusion matrix it reports the two numbers an on-call
engineer feels: top-k accuracy (is the right cause among the first answers) and the false-alarm rate on
healthy windows (how often a quiet cluster gets blamed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.metrics import confusion_matrix, f1_score, precision_recall_fscore_support

from models.rca import CLASSES, HEALTHY, RootCauseTree, top_k_accuracy
from models.rca_features import FEATURE_NAMES, mark_not_applicable

__all__ = ["RcaReport", "augment_missing", "evaluate", "fit_rca"]


def augment_missing(rows: pd.DataFrame, groups: Sequence[Sequence[str]], share: float, seed: int = 0
                    ) -> pd.DataFrame:
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


def fit_rca(rows: pd.DataFrame, *, min_strength: float = 0.0, model: RootCauseTree | None = None,
            missing_groups: Sequence[Sequence[str]] = (), missing_share: float = 0.0) -> RootCauseTree:
    """Fit on labelled rows (``FEATURE_NAMES`` + ``label``), leaving out faults weaker than ``min_strength``
    and adding ``missing_share`` copies with a feature group unmeasured (``augment_missing``)."""
    strength = rows["strength"] if "strength" in rows.columns else pd.Series(np.nan, index=rows.index)
    keep = (rows["label"] == HEALTHY) | strength.isna() | (strength >= min_strength)
    train = augment_missing(rows[keep], missing_groups, missing_share)
    return (model or RootCauseTree()).fit(train[list(FEATURE_NAMES)], train["label"].to_numpy())


@dataclass
class RcaReport:
    per_class: pd.DataFrame  # precision, recall, f1, support per class
    confusion: pd.DataFrame  # rows: true, columns: predicted
    macro_f1: float
    top1: float
    top3: float
    false_alarm_rows: float  # healthy candidates blamed on a cause
    false_alarm_windows: float  # all-healthy windows with at least one candidate blamed
    n_rows: int

    def metrics(self) -> dict[str, float]:
        return {"macro_f1": self.macro_f1, "top1_accuracy": self.top1, "top3_accuracy": self.top3,
                "false_alarm_rate": self.false_alarm_rows, "false_alarm_window_rate": self.false_alarm_windows}


def evaluate(model: RootCauseTree, rows: pd.DataFrame) -> RcaReport:
    """Score ``model`` on labelled rows; windows are grouped by ``scenario`` and ``at`` when present."""
    X, y = rows[list(FEATURE_NAMES)], rows["label"].to_numpy()
    pred = model.predict(X)
    labels = [c for c in CLASSES if c in set(y) | set(pred)]
    p, r, f, s = precision_recall_fscore_support(y, pred, labels=labels, zero_division=0)
    per_class = pd.DataFrame({"precision": p, "recall": r, "f1": f, "support": s}, index=labels)
    present = [c for c in labels if c in set(y)]
    confusion = pd.DataFrame(confusion_matrix(y, pred, labels=labels), index=labels, columns=labels)
    healthy = y == HEALTHY
    blamed = pred != HEALTHY
    windows = [c for c in ("scenario", "at") if c in rows.columns]
    if windows:
        per_window = pd.DataFrame({"clean": healthy, "blamed": blamed}).groupby(
            [rows[c].to_numpy() for c in windows]).agg(clean=("clean", "all"), blamed=("blamed", "any"))
        clean = per_window[per_window["clean"]]
        window_rate = float(clean["blamed"].mean()) if len(clean) else float("nan")
    else:
        window_rate = float("nan")
    return RcaReport(
        per_class=per_class,
        confusion=confusion,
        macro_f1=float(f1_score(y, pred, labels=present, average="macro", zero_division=0)),
        top1=float(np.mean(pred == y)),
        top3=top_k_accuracy(model, X, y, 3),
        false_alarm_rows=float(blamed[healthy].mean()) if healthy.any() else float("nan"),
        false_alarm_windows=window_rate,
        n_rows=len(rows),
    )
