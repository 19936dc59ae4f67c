"""The baseline a platform engineer would write: one threshold on one symptom per cause.

Each cause has the symptom an engineer would alert on first, and fallbacks for a site that does not export
it (no throttle reasons: the power drop; no NVLink error counters: the XID 74 flag). The threshold is the
one that maximises the cause-versus-rest F1 on the *training* rows (``fit_rules`` sees nothing else), and
the rules are tried in the order of their training precision: the first that fires names the cause, as an
if-chain of alert rules would. A symptom that is not measured (NaN, or a row of the other kind) never fires.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import pandas as pd

from models.rca import HEALTHY
from models.rca_evidence import EVIDENCE, signal_families

__all__ = ["CANDIDATES", "Rule", "Rules", "fit_rules", "signal_families"]

CANDIDATES = EVIDENCE  # the baseline's candidate features are the causes' own symptoms
_SENTINEL = -1e5  # NOT_APPLICABLE and ABSENT are far below: a value, not a measurement


@dataclass(frozen=True)
class Rule:
    cause: str
    feature: str
    op: str
    threshold: float
    precision: float  # on the training rows

    def fires(self, rows: pd.DataFrame) -> np.ndarray:
        x = rows[self.feature].to_numpy(dtype=np.float64)
        ok = np.isfinite(x) & (x > _SENTINEL)
        return np.asarray(ok & ((x > self.threshold) if self.op == ">" else (x < self.threshold)), dtype=bool)

    def excess(self, rows: pd.DataFrame) -> np.ndarray:
        """How far past the threshold (relative), to rank nodes that fire the same rule."""
        x = rows[self.feature].to_numpy(dtype=np.float64)
        d = (x - self.threshold) if self.op == ">" else (self.threshold - x)
        return np.nan_to_num(d / (abs(self.threshold) + 1e-9))


@dataclass(frozen=True)
class Rules:
    rules: tuple[Rule, ...]  # in the order they are tried

    def answer(self, rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Per row the cause of the first rule that fires (``healthy`` when none) and a ranking score."""
        shown = np.full(len(rows), HEALTHY, dtype=object)
        score = np.zeros(len(rows))
        for i, rule in enumerate(self.rules):
            fire = rule.fires(rows) & (shown == HEALTHY)
            shown[fire] = rule.cause
            # Earlier rules outrank later ones; within one, the larger excess ranks first.
            score[fire] = len(self.rules) - i + np.tanh(rule.excess(rows)[fire]) / 2
        return shown, score


def _best_threshold(x: np.ndarray, hit: np.ndarray, op: str) -> tuple[float, float, float]:
    """(threshold, F1, precision) of ``x op threshold`` against ``hit``, over quantiles of ``x``."""
    best = (np.nan, -1.0, 0.0)
    values = x[np.isfinite(x) & (x > _SENTINEL)]
    if not len(values) or not hit.any():
        return best
    for thr in np.unique(np.quantile(values, np.linspace(0.0, 1.0, 201))):
        fire = np.isfinite(x) & (x > _SENTINEL) & ((x > thr) if op == ">" else (x < thr))
        tp = float((fire & hit).sum())
        if tp == 0:
            continue
        precision, recall = tp / fire.sum(), tp / hit.sum()
        f1 = 2 * precision * recall / (precision + recall)
        if f1 > best[1]:
            best = (float(thr), f1, precision)
    return best


def fit_rules(train: pd.DataFrame, absent: Collection[str] = (), min_strength: float = 0.0) -> Rules:
    """One rule per cause from the training rows (``label`` + features); ``absent`` features are not used,
    faults weaker than ``min_strength`` are left out as the tree's training leaves them out."""
    strength = train["strength"] if "strength" in train.columns else pd.Series(np.nan, index=train.index)
    keep = (train["label"] == HEALTHY) | strength.isna() | (strength >= min_strength)
    rows = train[keep.to_numpy()]
    label = rows["label"].to_numpy()
    rules = []
    for cause, options in CANDIDATES.items():
        hit = label == cause
        for feature, op in options:
            if feature in absent or feature not in rows.columns:
                continue
            x = rows[feature].to_numpy(dtype=np.float64)
            thr, f1, precision = _best_threshold(x, hit, op)
            if f1 > 0:
                rules.append(Rule(cause, feature, op, thr, precision))
                break
    return Rules(tuple(sorted(rules, key=lambda r: -r.precision)))
