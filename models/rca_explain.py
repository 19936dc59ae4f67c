"""The root-cause tree's decision path in words: conditions with the measured values and their units.

Split from ``models.rca`` (fitting, the NaN-marginalising walk, serialisation) because the wording is a
concern of its own that changes nothing the tree answers: it reads only one fitted scikit-learn ``Tree``,
one row and the feature table's units (``models.rca_specs``), and keeps apart, for the on-call engineer, a
symptom threshold, a split on whether a series was scraped at all (``ABSENT``) and a split on the candidate's
kind (``NOT_APPLICABLE``). Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from models.rca_specs import ABSENT, NOT_APPLICABLE, SPECS

__all__ = ["explain_path"]

_UNITS = {s.name: s.unit for s in SPECS}
_ABSENT_SPLIT = (ABSENT + 3 * NOT_APPLICABLE) / 4  # a threshold below this separates ABSENT from the rest


def _fmt(name: str, value: float) -> str:
    unit = _UNITS.get(name, "")
    if not np.isfinite(value):
        return "missing"
    if value == ABSENT:
        return "not scraped on this node"
    if unit == "ratio":
        return f"{value * 100:.0f} %"
    if unit in ("°C", "%", "GPUs", "/s"):
        return f"{value:.3g} {unit}" if unit != "%" else f"{value:.0f} %"
    return f"{value:.3g}"


def explain_path(tree: Any, row: np.ndarray, names: list[str], pred: str, blanked: list[str] | None) -> str:
    """The path ``row`` takes through the scikit-learn ``Tree`` ``tree`` in words, ending in ``pred``.

    Conditions on one feature are merged into the tightest bound each way, in the order the path first met
    the feature. ``blanked`` names the unmeasured features a reduced tree was trained without (None: the main
    tree answered), so the reader knows the answer rests on the other families."""
    missing_left = getattr(tree, "missing_go_to_left", np.zeros(tree.node_count, dtype=bool))
    bounds: dict[tuple[int, bool], float] = {}  # (feature, is_upper) → tightest threshold
    order: list[int] = []
    node = 0
    while tree.children_left[node] != -1:
        f, thr = int(tree.feature[node]), float(tree.threshold[node])
        value = row[f]
        left = bool(missing_left[node]) if not np.isfinite(value) else value <= thr
        key = (f, left)
        bounds[key] = min(bounds.get(key, np.inf), thr) if left else max(bounds.get(key, -np.inf), thr)
        if f not in order:
            order.append(f)
        node = tree.children_left[node] if left else tree.children_right[node]
    parts: list[str] = []
    skipped: list[str] = []
    for f in order:
        value = row[f]
        shown = _fmt(names[f], value)
        for upper in (True, False):
            if (f, upper) not in bounds:
                continue
            thr = bounds[(f, upper)]
            if thr < NOT_APPLICABLE / 4 and value == ABSENT:
                parts.append(f"{names[f]} not scraped on this node (its exporter went dark)")
                continue
            if thr < _ABSENT_SPLIT and value != NOT_APPLICABLE:
                parts.append(f"{names[f]} scraped on this node")
                continue
            if value == NOT_APPLICABLE or thr < NOT_APPLICABLE / 4:
                continue  # a split on the candidate's kind (node or queue), not a symptom
            if not np.isfinite(thr):  # a split on "measured or not" (scikit-learn uses +inf)
                parts.append(f"{names[f]} is {'measured' if upper else 'missing'}")
            elif not np.isfinite(value):
                skipped.append(names[f])  # averaged over both branches: say which, not "x is missing"
            else:
                parts.append(f"{names[f]} = {shown} {'≤' if upper else '>'} {_fmt(names[f], thr)}")
    text = " and ".join(parts or ["no measured condition"])
    if skipped:
        text += f" (not measured, so both branches averaged: {', '.join(dict.fromkeys(skipped))})"
    if blanked is not None:
        text += f" (read by the tree trained without {', '.join(blanked)}: not measured here)"
    return f"{text} → {pred}"
