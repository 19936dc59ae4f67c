"""One-off sweep of interval calibrations on cached benchmark records, nothing tuned across traces.

Usage, from the repository root (after ``python -m bench.forecast --outer 8 --frozen`` filled the cache):
    python -m bench.experiments.forecast_calibration_sweep --cache DIR [--lstm fresh|frozen|rolling]

Why it exists: ``python -m bench.forecast --calibration`` replays what ``auto`` can compute; this sweep also
scores what it cannot yet (calibration per lead day on windows whose actuals are only partly known, backtest
networks refreshed weekly, serving the frozen network), to say where the coverage gap comes from. It reads
the records ``python -m bench.forecast --outer 8 --frozen`` caches (``{trace}-{model}-w29.pkl``,
``{trace}-lstm-w8.pkl``, ``{trace}-lstm-frozen29.pkl``; ``--lstm rolling`` also networks frozen at windows 14
and 21, ``{trace}-lstm-frozenat14.pkl`` / ``frozenat21.pkl``, made as ``bench.experiments.forecast_fresh_sweep``
says) and scores, at the 8 scored origins of each trace, the pool ``bench.forecast`` chose for it on the other
two traces (hard-coded below from that run).
``--lstm``: ``fresh`` serves a network trained at the origin, backtests with one frozen at the oldest (as
auto); ``frozen`` serves the frozen one too; ``rolling`` backtests with networks at most 6 days stale.
Modes: ``plain`` CQR on the C newest whole windows; ``lead`` per lead day on the C newest windows whose
actuals for that day are known; ``selfC`` / ``selflead`` the same times the fit's own multiplier
(``bench.experiments.forecast_selftune``'s replay; ``selflead`` with partly known pseudo-test windows too).
Output: one line per mode, each trace's held-out 80 % / 95 % coverage at the scored origins (the ``self``
modes add the fit's median multipliers in parentheses), then each trace's 80 % coverage origin by origin.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from bench.experiments.forecast_selftune import self_tuned_gamma

REPO = Path(__file__).resolve().parents[2]

H, W, OUTER, LEVELS = 168, 29, 8, (80, 95)
RULES = {  # chosen by bench.forecast --outer 8 --frozen on the other two traces (docs/design.md)
    "philly": {"lstm": 0.8, "ets": 0.2},
    "alibaba": {"lstm": 0.9, "ets": 0.1},
    "sim": {"lstm": 0.7, "naive": 0.15, "drift": 0.15},
}
CONFIGS = (("plain", 7), ("lead", 3), ("lead", 7), ("selfC", 7), ("selflead", 7), ("selflead", 3))
TESTS = 7


def _lstm(cache: Path, trace: str, how: str) -> pd.DataFrame:
    def read(name: str) -> pd.DataFrame:
        frame: pd.DataFrame = pickle.loads((cache / f"{trace}-lstm-{name}.pkl").read_bytes())[0]
        return frame

    frozen = read("frozen29")
    if how == "frozen":
        return frozen
    parts = [read("w8"), frozen[frozen["window"] >= OUTER]]
    if how == "rolling":
        f14, f21 = read("frozenat14"), read("frozenat21")
        parts = [parts[0], f14[f14["window"].between(8, 14)], f21[f21["window"].between(15, 21)]]
        parts.append(frozen[frozen["window"] >= 22])
    return pd.concat(parts, ignore_index=True)


def scores(cache: Path, trace: str, how: str) -> dict[int, np.ndarray]:
    """(series, window, lead) CQR scores of the trace's pool at every window, per level."""
    rule = RULES[trace]
    records: dict[str, pd.DataFrame] = {
        m: _lstm(cache, trace, how) if m == "lstm" else pickle.loads((cache / f"{trace}-{m}-w29.pkl").read_bytes())[0]
        for m in rule
    }
    sids = sorted(records["lstm"]["series_id"].unique())
    cells: dict[tuple[str, str], np.ndarray] = {}
    for m, r in records.items():
        si = r["series_id"].map({s: i for i, s in enumerate(sids)}).to_numpy()
        w, k = r["window"].to_numpy(int), r["lead"].to_numpy(int) - 1
        for c in ("lo-80", "hi-80", "lo-95", "hi-95", "actual"):
            cells[m, c] = np.full((len(sids), W, H), np.nan)
            cells[m, c][si, w, k] = r[c].to_numpy(float)
    actual = cells[next(iter(rule)), "actual"]
    out = {}
    for lvl in LEVELS:
        lo = sum(wt * cells[m, f"lo-{lvl}"] for m, wt in rule.items())
        hi = sum(wt * cells[m, f"hi-{lvl}"] for m, wt in rule.items())
        out[lvl] = np.maximum(np.asarray(lo) - actual, actual - np.asarray(hi))
    return out


def _shift(rows: np.ndarray, alphas: np.ndarray) -> np.ndarray | None:
    rows = rows[np.isfinite(rows)]
    if rows.size < 20:
        return None
    return np.asarray(np.quantile(rows, np.clip((1 - alphas) * (1 + 1 / rows.size), 0.0, 1.0)), dtype=float)


def shifts(s: np.ndarray, t: int, alphas: np.ndarray, mode: str, c: int) -> np.ndarray:
    """(alphas, leads): the shifts of window ``t`` of one series ((window, lead) scores); NaN: no evidence."""
    out = np.full((alphas.size, H), np.nan)
    for b in range(7) if "lead" in mode else (None,):
        start = t + (b + 1 if b is not None else 7)
        cols = slice(24 * b, 24 * b + 24) if b is not None else slice(None)
        q = _shift(s[start : start + c, cols].ravel(), alphas)
        if q is not None:
            out[:, cols] = q[:, None]
    return out


def own_gamma(s: np.ndarray, o: int, lvl: int, mode: str, c: int) -> float:
    """The fit's multiplier at origin ``o``: ``selfC`` via bench.experiments.forecast_selftune on whole windows;
    ``selflead`` the same replay per lead day, partly known windows included."""
    if mode == "selfC":
        return self_tuned_gamma(list(s[:, o + 7 :]), lvl, gap=7, windows=c, tests=TESTS)[0]
    alphas = np.geomspace(0.002, 0.95, 80)
    hits, count, scored = np.zeros(alphas.size), 0, set()
    for series in s:
        for t in range(o + 1, min(W, o + 1 + TESTS + 7)):
            known = np.isfinite(series[t]) & (np.arange(H) < 24 * (t - o))
            grid = shifts(series, t, alphas, mode, c)
            known &= np.isfinite(grid[0])
            if known.any():
                hits += (series[t][known][None, :] <= grid[:, known]).sum(axis=1)
                count += int(known.sum())
                scored.add(t)
    if not count:
        return 1.0
    best = alphas[int(np.argmin(np.abs(hits / count - lvl / 100)))] / (1 - lvl / 100)
    return float(np.exp(len(scored) / (len(scored) + 3) * np.log(best)))


def coverage(s: np.ndarray, lvl: int, mode: str, c: int) -> tuple[float, list[float], list[float]]:
    """Pooled coverage, the fit's multiplier and the coverage at each origin."""
    covered, gammas, per_origin = [], [], []
    for o in range(OUTER):
        g = own_gamma(s, o, lvl, mode, c) if mode.startswith("self") else 1.0
        gammas.append(g)
        here = []
        for series in s:
            q = np.nan_to_num(shifts(series, o, np.array([min((1 - lvl / 100) * g, 0.999)]), mode, c)[0])  # none: raw
            ok = np.isfinite(series[o])
            here.append(series[o][ok] <= q[ok])
        covered += here
        per_origin.append(float(np.concatenate(here).mean()))
    return float(np.concatenate(covered).mean()), gammas, per_origin


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--lstm", choices=("fresh", "frozen", "rolling"), default="fresh")
    args = parser.parse_args()
    data = {t: scores(args.cache, t, args.lstm) for t in RULES}
    print(f"LSTM: {args.lstm}; held-out coverage 80 % / 95 % at {OUTER} origins (the fit's multipliers, median)")
    for mode, c in CONFIGS:
        cells = []
        for trace, s in data.items():
            got = {lvl: coverage(s[lvl], lvl, mode, c) for lvl in LEVELS}
            cells.append(
                f"{trace} {got[80][0]:.3f} / {got[95][0]:.3f}"
                + (f" ({np.median(got[80][1]):.2f} / {np.median(got[95][1]):.2f})" if mode.startswith("self") else "")
            )
        print(f"{mode:8s} C={c}: " + "  ".join(cells), flush=True)
    # how noisy 8 overlapping weekly horizons a day apart are: 80 % coverage origin by origin (newest first)
    for trace, s in data.items():
        print(
            f"per origin, lead C=3, 80 %, {trace}: " + " ".join(f"{v:.2f}" for v in coverage(s[80], 80, "lead", 3)[2])
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
