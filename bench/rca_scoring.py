"""Scores of per-row root-cause answers on labelled windows, with bootstrap 95 % intervals over windows.

- macro-F1 over every labelled class, ``insufficient_data`` counted as a wrong answer (strict);
- strict top-1: share of fault rows answered with their cause (``insufficient_data`` wrong);
- node scope: share of fault windows (one per fault and window, queue faults aside) where the first
  finding ``predictor diagnose --scope job=J`` would report for the fault's nodes names a culprit node
  (``scope+cause``: and the right cause). Findings are ranked by probability as diagnose ranks them; job-wide
  causes are merged per job keeping the most probable node, which leaves the first finding unchanged;
- healthy false alarms: share of healthy rows answered with a cause.

Intervals resample whole windows (``scenario``, ``at``) with replacement: rows of one window share a
cluster state, so resampling rows would make the intervals too narrow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from models.rca import HEALTHY, INSUFFICIENT

__all__ = ["METRICS", "Scores", "bootstrap", "scope_table", "score"]

MIN_PROBABILITY = 0.5
METRICS = ("macro_f1", "top1_strict", "node_scope", "scope_cause", "false_alarms")


@dataclass(frozen=True)
class Scores:
    point: dict[str, float]
    low: dict[str, float]
    high: dict[str, float]
    n_fault_rows: int
    n_healthy_rows: int
    n_scope: int

    def cell(self, name: str) -> str:
        p, lo, hi = self.point[name], self.low[name], self.high[name]
        return "n/a" if not np.isfinite(p) else f"{p:.3f} [{lo:.3f}, {hi:.3f}]"


def _f1(conf: np.ndarray, present: np.ndarray) -> float:
    tp = np.diag(conf)
    pred, true = conf.sum(axis=0), conf.sum(axis=1)
    with np.errstate(all="ignore"):
        p = np.where(pred > 0, tp / pred, 0.0)
        r = np.where(true > 0, tp / true, 0.0)
        f = np.where(p + r > 0, 2 * p * r / (p + r), 0.0)
    keep = present & (true > 0)
    return float(f[keep].mean()) if keep.any() else float("nan")


def scope_table(rows: pd.DataFrame, shown: np.ndarray, score_: np.ndarray) -> pd.DataFrame:
    """One row per (fault, window): the first finding's node, cause, and whether it is a culprit."""
    frame = rows.assign(shown=shown, score=score_)
    fault = frame[(frame["label"] != HEALTHY) & (frame["label"] != "scheduling_starvation") & (frame["role"] != "")]
    out = []
    for (scenario, at, fid), part in fault.groupby(["scenario", "at", "fault_id"], sort=False):
        # diagnose reports a cause only at probability >= 0.5 (``min_probability``); the rules' scores are >= 1.
        found = part[~part["shown"].isin([HEALTHY, INSUFFICIENT]) & (part["score"] >= MIN_PROBABILITY)]
        first = found.iloc[int(np.argmax(found["score"].to_numpy()))] if len(found) else None
        out.append(
            {
                "scenario": scenario,
                "at": at,
                "fault_id": fid,
                "cause": part["label"].iloc[0],
                "named": "" if first is None else first["node"],
                "named_cause": "" if first is None else first["shown"],
                "named_role": "none" if first is None else first["role"],
                "right": first is not None and first["role"] == "culprit",
                "right_cause": first is not None and first["role"] == "culprit" and first["shown"] == first["label"],
            }
        )
    return pd.DataFrame(out)


def score(rows: pd.DataFrame, shown: np.ndarray, score_: np.ndarray, n_boot: int = 300, seed: int = 0) -> Scores:
    """All ``METRICS`` with bootstrap intervals; ``rows`` need ``label``, ``role``, ``node``, ``scenario``, ``at``."""
    y = rows["label"].to_numpy().astype(str)
    shown = np.asarray(shown).astype(str)
    classes = sorted(set(y) | set(shown))
    index = {c: i for i, c in enumerate(classes)}
    yi = np.array([index[c] for c in y])
    pi = np.array([index[c] for c in shown])
    present = np.array([c in set(y) for c in classes])
    win = pd.factorize(pd.MultiIndex.from_arrays([rows["scenario"].to_numpy(), rows["at"].to_numpy()]))[0]
    n_win, k = int(win.max()) + 1 if len(win) else 0, len(classes)
    conf = np.zeros((n_win, k, k))
    np.add.at(conf, (win, yi, pi), 1)
    fault, healthy = y != HEALTHY, y == HEALTHY
    right = (shown == y) & fault
    alarm = healthy & ~np.isin(shown, [HEALTHY, INSUFFICIENT])
    per = (
        pd.DataFrame({"w": win, "fault": fault, "right": right, "healthy": healthy, "alarm": alarm}).groupby("w").sum()
    )
    per = per.reindex(range(n_win), fill_value=0)
    sc = scope_table(rows, shown, score_)
    if len(sc):
        key = pd.MultiIndex.from_arrays([sc["scenario"].to_numpy(), sc["at"].to_numpy()])
        sw = pd.MultiIndex.from_arrays([rows["scenario"].to_numpy(), rows["at"].to_numpy()])
        lookup = dict(zip(sw, win, strict=True))
        sc_w = np.array([lookup[k_] for k_ in key])
    else:
        sc_w = np.zeros(0, dtype=int)
    s_n = np.bincount(sc_w, minlength=n_win)
    s_r = np.bincount(sc_w, weights=sc["right"].to_numpy(dtype=float) if len(sc) else None, minlength=n_win)
    s_c = np.bincount(sc_w, weights=sc["right_cause"].to_numpy(dtype=float) if len(sc) else None, minlength=n_win)

    def metrics(w: np.ndarray) -> dict[str, float]:
        counts = np.bincount(w, minlength=n_win)
        agg = per.to_numpy().T @ counts
        f, r, h, a = agg[0], agg[1], agg[2], agg[3]
        n_s = float(s_n @ counts)
        return {
            "macro_f1": _f1(np.tensordot(counts, conf, axes=1), present),
            "top1_strict": r / f if f else float("nan"),
            "node_scope": float(s_r @ counts) / n_s if n_s else float("nan"),
            "scope_cause": float(s_c @ counts) / n_s if n_s else float("nan"),
            "false_alarms": a / h if h else float("nan"),
        }

    point = metrics(np.arange(n_win))
    rng = np.random.default_rng(seed)
    draws = pd.DataFrame([metrics(rng.integers(n_win, size=n_win)) for _ in range(n_boot)]) if n_win else pd.DataFrame()
    low = {m: float(np.nanpercentile(draws[m], 2.5)) if len(draws) else float("nan") for m in METRICS}
    high = {m: float(np.nanpercentile(draws[m], 97.5)) if len(draws) else float("nan") for m in METRICS}
    return Scores(point, low, high, int(fault.sum()), int(healthy.sum()), len(sc))


def bootstrap(values: np.ndarray, groups: np.ndarray, n_boot: int = 300, seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``values`` and its 95 % interval, resampling ``groups`` (e.g. windows) with replacement."""
    g = pd.factorize(groups)[0]
    n = int(g.max()) + 1
    sums, counts = np.bincount(g, weights=values, minlength=n), np.bincount(g, minlength=n)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        c = np.bincount(rng.integers(n, size=n), minlength=n)
        draws.append(float(sums @ c) / max(float(counts @ c), 1.0))
    return float(sums.sum() / counts.sum()), float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))
