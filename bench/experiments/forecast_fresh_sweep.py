"""Interval calibrations that account for the backtest network's staleness, scored held out.

Usage, from the repository root (after ``python -m bench.forecast --outer 8 --frozen`` filled the cache):
    python -m bench.experiments.forecast_fresh_sweep --cache DIR [--source single|exact|allfresh]
        [--designs a,b] [--staleness | --loto]

Why it exists: ``auto`` backtests its LSTM with ONE network trained at the oldest of its 3 weekly inner
origins and frozen, so its newer backtest windows meet a network 7 and 14 days stale while the served one is
fresh; its conformal scores are staler than the served forecast. Each design below only uses what ``auto``'s
own fit has (its 3 weekly windows, the members' bands, the staleness of each window), and is scored at the
8 scored origins of each trace with the pool ``python -m bench.forecast --outer 8 --frozen`` chose for it on
the other two traces (hard-coded, as in ``bench.experiments.forecast_calibration_sweep``). Nothing is tuned
across traces. The served LSTM at a scored origin is a network trained there (``{trace}-lstm-w8.pkl``).

``--source``: which frozen network forecast the inner windows. ``single``: one network per trace trained at
the oldest window (``{trace}-lstm-frozen29.pkl``, the ``--frozen`` run's; at scored origin ``o`` it is
``7 − o`` days staler than ``auto``'s). ``exact``: at scored origin ``o`` the network trained at window
``o + 21`` (``{trace}-lstm-frozenat{t}.pkl``, ``frozen29`` for 28), exactly ``auto``'s; where a trace is too
short for that window the oldest trainable one, which is what ``auto`` trains at too. ``allfresh``: every
window forecast by a network trained at its own origin (``frozenat{w}`` read at ``w``; a counterfactual
needing a training per window, except where only the newest inner window is used: ``w1``, ``member-w1``,
which is what ``auto`` serves). The networks at windows 8-27 are made with ``bench.forecast``'s
``_backtest_cached(frame, "lstm", t + 1, path, frozen=True)``.

Windows: index ``w`` is the origin ``w`` days before the newest (``window_cut``); a network trained at
window ``t`` forecasts window ``w ≤ t`` ``t − w`` days stale.

Output: one row per design, each trace's held-out 80 % / 95 % coverage and the worst miss of either level
over the traces (then 80 % coverage origin by origin). ``--staleness`` prints only the LSTM's error by network
staleness; ``--loto`` only the design chosen on two traces and scored on the third.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from models.forecast.base import _tidy
from models.forecast.selection import cqr_shift

REPO = Path(__file__).resolve().parents[2]

H, W, OUTER, LEVELS, WEEK = 168, 29, 8, (80, 95), 7
RULES = {  # chosen by bench.forecast --outer 8 --frozen on the other two traces (docs/design.md)
    "philly": {"lstm": 0.8, "ets": 0.2},
    "alibaba": {"lstm": 0.9, "ets": 0.1},
    "sim": {"lstm": 0.7, "naive": 0.15, "drift": 0.15},
}
COLUMNS = ("mean", "lo-80", "hi-80", "lo-95", "hi-95", "actual")


def _cells(frame: pd.DataFrame, sids: list[str]) -> dict[str, np.ndarray]:
    idx = frame["series_id"].map({s: i for i, s in enumerate(sids)}).to_numpy()
    w, k = frame["window"].to_numpy(int), frame["lead"].to_numpy(int) - 1
    out = {}
    for c in COLUMNS:
        out[c] = np.full((len(sids), W, H), np.nan)
        out[c][idx, w, k] = frame[c].to_numpy(float)
    return out


def load(cache: Path, trace: str, source: str) -> dict[str, object]:
    """Per member, per origin ``o``: arrays (series, window, lead); and each inner window's staleness."""

    def read(name: str) -> pd.DataFrame:
        frame: pd.DataFrame = pickle.loads((cache / f"{trace}-{name}.pkl").read_bytes())[0]
        return frame

    base = {m: read(f"{m}-w29") for m in RULES[trace] if m != "lstm"}
    sids = sorted(read("lstm-w8")["series_id"].unique())
    cells = {m: _cells(f, sids) for m, f in base.items()}
    fresh = _cells(read("lstm-w8"), sids)
    frozen29 = read("lstm-frozen29")
    oldest = int(frozen29["window"].max())  # where the trace's first trainable network was trained
    nets: dict[int, dict[str, np.ndarray]] = {}
    per_origin = []
    if source == "allfresh":  # every window forecast by a network trained there (a counterfactual: 3 trainings)
        lstm = {c: fresh[c].copy() for c in COLUMNS}
        for w in range(OUTER, oldest + 1):
            name = "lstm-frozen29" if w == oldest else f"lstm-frozenat{w}"
            if not (cache / f"{trace}-{name}.pkl").is_file():
                print(f"# {trace}: no network trained at window {w}: its window is left out")
                continue
            got = _cells(read(name), sids)
            for c in COLUMNS:
                lstm[c][:, w] = got[c][:, w]
        for c in COLUMNS:
            lstm[c][:, oldest + 1 :] = np.nan
        return {"sids": sids, "per_origin": [({**cells, "lstm": lstm}, oldest)] * OUTER}
    for o in range(OUTER):
        t = min(o + 3 * WEEK, oldest) if source == "exact" else oldest
        path = cache / f"{trace}-lstm-frozenat{t}.pkl"
        if t != oldest and not path.is_file():
            print(f"# {trace}: no network trained at window {t}; origin {o} uses the one at {oldest}")
            t = oldest
        if t not in nets:
            nets[t] = _cells(frozen29 if t == oldest else read(f"lstm-frozenat{t}"), sids)
        lstm = {c: nets[t][c].copy() for c in COLUMNS}
        for c in COLUMNS:  # the served network at the scored origins is trained there
            lstm[c][:, :OUTER] = fresh[c][:, :OUTER]
        per_origin.append(({**cells, "lstm": lstm}, t))
    return {"sids": sids, "per_origin": per_origin}


def pool(members: dict[str, dict[str, np.ndarray]], rule: dict[str, float], col: str) -> np.ndarray:
    return np.asarray(sum(wt * members[m][col] for m, wt in rule.items()))


def score(members: dict[str, dict[str, np.ndarray]], rule: dict[str, float], lvl: int) -> np.ndarray:
    actual = members["lstm"]["actual"]
    return np.maximum(pool(members, rule, f"lo-{lvl}") - actual, actual - pool(members, rule, f"hi-{lvl}"))


def member_score(cells: dict[str, np.ndarray], actual: np.ndarray, lvl: int) -> np.ndarray:
    return np.maximum(cells[f"lo-{lvl}"] - actual, actual - cells[f"hi-{lvl}"])


def design_shifts(
    design: str, members: dict[str, dict[str, np.ndarray]], rule: dict[str, float], o: int, t: int, lvl: int
) -> dict[str, np.ndarray]:
    """Per member (or ``pool``): the shift per series (NaN: none). The inner windows are o+7, o+14, o+21."""
    n = members["lstm"]["actual"].shape[0]
    inner = [o + WEEK * j for j in (1, 2, 3) if o + WEEK * j <= t]  # a network cannot forecast before its cut
    inner = [w for w in inner if np.isfinite(members["lstm"]["actual"][:, w]).any()]
    s = score(members, rule, lvl)[:, inner]  # (series, windows, lead)
    stale = np.array([t - w for w in inner], float)
    out: dict[str, np.ndarray] = {}
    if design == "weekly":
        out["pool"] = np.array([_q(s[i].ravel(), lvl) for i in range(n)])
    elif design == "freshest":  # only the window the network was trained at (or the least stale one)
        j = int(np.argmin(stale))
        out["pool"] = np.array([_q(s[i, j], lvl) for i in range(n)])
    elif design == "rescale":  # each window's scores times (LSTM MAE at the freshest window / at this one)
        err = np.nanmean(np.abs(members["lstm"]["mean"][:, inner] - members["lstm"]["actual"][:, inner]), axis=2)
        j = int(np.argmin(stale))
        ratio = err[:, [j]] / err
        out["pool"] = np.array([_q((s[i] * ratio[i][:, None]).ravel(), lvl) for i in range(n)])
    elif design == "regress":  # pooled scale-free quantile per window, linear in staleness, read at 0
        width = _width(members, rule, inner, lvl)
        z = s / np.maximum(width, 1e-9)[:, None, None]
        qs = np.array([_q(z[:, j].ravel(), lvl) for j in range(len(inner))])
        ok = np.isfinite(qs)
        if ok.sum() >= 2 and np.ptp(stale[ok]) > 0:
            q0 = np.polyfit(stale[ok], qs[ok], 1)[1]
        else:
            q0 = np.nanmean(qs) if ok.any() else np.nan
        out["pool"] = q0 * width
    elif design.startswith("w") and design[1:].isdigit():  # only the windows o + 7j, j in the digits
        keep = [k for k, w in enumerate(inner) if str((w - o) // WEEK) in design[1:]]
        out["pool"] = np.array([_q(s[i, keep].ravel(), lvl) if keep else np.nan for i in range(n)])
    elif design.startswith("member-w"):  # the LSTM on the windows o + 7j (digits), the baselines on all
        keep = [k for k, w in enumerate(inner) if str((w - o) // WEEK) in design[8:]]
        actual = members["lstm"]["actual"][:, inner]
        for m in rule:
            ms = member_score({c: members[m][c][:, inner] for c in COLUMNS}, actual, lvl)
            rows = ms[:, keep] if m == "lstm" else ms
            out[m] = np.array([_q(rows[i].ravel(), lvl) for i in range(n)])
    elif design == "two-freshest":  # drop the stalest window
        keep = np.argsort(stale)[:2]
        out["pool"] = np.array([_q(s[i, keep].ravel(), lvl) for i in range(n)])
    elif design == "fresh-pooled":  # the freshest window, scale-free scores pooled over every series
        j = int(np.argmin(stale))
        width = _width(members, rule, inner, lvl)
        z = s[:, j] / np.maximum(width, 1e-9)[:, None]
        out["pool"] = _q(z.ravel(), lvl) * width
    elif design in ("did", "did-series"):  # staleness penalty net of the week's difficulty (the baselines')
        actual = members["lstm"]["actual"][:, inner]
        lstm_err = np.abs(members["lstm"]["mean"][:, inner] - actual)
        rest = {m: wt for m, wt in rule.items() if m != "lstm"}
        base = np.asarray(sum(wt * members[m]["mean"][:, inner] for m, wt in rest.items())) / sum(rest.values())
        base_err = np.abs(base - actual)
        axis = 2 if design == "did-series" else (0, 2)
        rel = np.nanmean(lstm_err, axis=axis) / np.nanmean(base_err, axis=axis)  # per window (and series)
        j = int(np.argmin(stale))
        pen = rel / (rel[..., [j]] if design == "did-series" else rel[j])
        pen = np.broadcast_to(pen, s.shape[:2])
        out["pool"] = np.array([_q((s[i] / pen[i][:, None]).ravel(), lvl) for i in range(n)])
    elif design in ("member", "member-all"):  # the LSTM on its freshest window, the baselines on all of theirs
        actual = members["lstm"]["actual"][:, inner]
        j = int(np.argmin(stale))
        for m in rule:
            ms = member_score({c: members[m][c][:, inner] for c in COLUMNS}, actual, lvl)
            if m == "lstm" and design == "member":
                out[m] = np.array([_q(ms[i, j], lvl) for i in range(n)])
            else:
                out[m] = np.array([_q(ms[i].ravel(), lvl) for i in range(n)])
    else:
        raise ValueError(design)
    return out


def _width(members: dict[str, dict[str, np.ndarray]], rule: dict[str, float], inner: list[int], lvl: int) -> np.ndarray:
    """Per series: the pool's mean band width over the inner windows (the scale scores are divided by)."""
    lo, hi = pool(members, rule, f"lo-{lvl}")[:, inner], pool(members, rule, f"hi-{lvl}")[:, inner]
    return np.asarray(np.nanmean(hi - lo, axis=(1, 2)))


def _q(scores: np.ndarray, lvl: int) -> float:
    q = cqr_shift(np.asarray(scores, float), lvl, 1.0)
    return np.nan if q is None else q


DESIGNS = (
    *("weekly", "freshest", "rescale", "regress", "member", "member-all", "two-freshest", "fresh-pooled"),
    *("did", "did-series", "w1", "w12", "member-w1"),
)


def coverage(data: dict[str, object], trace: str, design: str) -> tuple[dict[int, float], list[float]]:
    rule = RULES[trace]
    hit: dict[int, list[np.ndarray]] = {lvl: [] for lvl in LEVELS}
    per_origin = []
    for o, (members, t) in enumerate(data["per_origin"]):  # type: ignore[attr-defined]
        shifts = {lvl: design_shifts(design, members, rule, o, t, lvl) for lvl in LEVELS}
        here = []
        for i in range(len(data["sids"])):  # type: ignore[arg-type]
            actual = members["lstm"]["actual"][i, o]
            mean = pool(members, rule, "mean")[i, o]
            if not (np.isfinite(actual).any() and np.isfinite(mean).all()):
                continue
            raw = {}
            for lvl in LEVELS:
                sh = shifts[lvl]
                if "pool" in sh:
                    q = sh["pool"][i]
                    lo, hi = pool(members, rule, f"lo-{lvl}")[i, o], pool(members, rule, f"hi-{lvl}")[i, o]
                    raw[lvl] = (lo - q, hi + q) if np.isfinite(q) else (lo, hi)
                else:
                    lo = sum(wt * (members[m][f"lo-{lvl}"][i, o] - np.nan_to_num(sh[m][i])) for m, wt in rule.items())
                    hi = sum(wt * (members[m][f"hi-{lvl}"][i, o] + np.nan_to_num(sh[m][i])) for m, wt in rule.items())
                    raw[lvl] = (lo, hi)
            _, bands = _tidy(mean, raw, LEVELS, fallback=float(mean[0]))
            ok = np.isfinite(actual)
            for lvl in LEVELS:
                lo, hi = bands[lvl]
                hit[lvl].append(((actual >= lo) & (actual <= hi))[ok])
            here.append(((actual >= bands[80][0]) & (actual <= bands[80][1]))[ok])
        per_origin.append(float(np.concatenate(here).mean()))
    return {lvl: float(np.concatenate(v).mean()) for lvl, v in hit.items()}, per_origin


def staleness(cache: Path) -> None:
    """The LSTM alone at the scored windows: MAE and raw 80 % coverage by how stale its network is."""
    print("| network (days stale at windows 0-7) | " + " | ".join(RULES) + " |")
    for t in (None, 14, 21, 28):  # 28: the oldest trainable (Alibaba: 17)
        cells = []
        for trace in RULES:
            name = "lstm-w8" if t is None else "lstm-frozen29" if t == 28 else f"lstm-frozenat{t}"
            path = cache / f"{trace}-{name}.pkl"
            r = pickle.loads(path.read_bytes())[0]
            trained = int(r["window"].max())
            if t == 21 and trained != t:  # a short trace: its oldest network is the last row's
                cells.append("-")
                continue
            r = r[(r["window"] < OUTER) & r["actual"].notna()]
            mae = float((r["mean"] - r["actual"]).abs().mean())
            cov = float(((r["actual"] >= r["lo-80"]) & (r["actual"] <= r["hi-80"])).mean())
            stale = "0" if t is None else f"{trained - OUTER + 1}-{trained}"
            cells.append(f"{mae:.2f} / {cov:.3f} ({stale})")
        print(f"| {'each origin' if t is None else f'window {t}'} | " + " | ".join(cells) + " |")


def loto(cache: Path) -> None:
    """The design chosen on two traces (lowest summed |c80 − 0.8| + |c95 − 0.95|), scored on the third;
    among the designs one backtest training computes (``allfresh`` only where one network suffices)."""
    cands = [("exact", d) for d in DESIGNS] + [("allfresh", d) for d in ("w1", "member-w1")]
    data = {src: {t: load(cache, t, src) for t in RULES} for src in ("exact", "allfresh")}
    cov = {c: {t: coverage(data[c[0]][t], t, c[1])[0] for t in RULES} for c in cands}
    for held in RULES:
        train = [t for t in RULES if t != held]
        best = min(cands, key=lambda c: sum(abs(cov[c][t][80] - 0.8) + abs(cov[c][t][95] - 0.95) for t in train))
        print(f"held out {held}: chose {best} on {train}: {cov[best][held][80]:.3f} / {cov[best][held][95]:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--source", choices=("single", "exact", "allfresh"), default="exact")
    parser.add_argument("--designs", default=",".join(DESIGNS))
    parser.add_argument("--staleness", action="store_true", help="only the LSTM's error by network staleness")
    parser.add_argument("--loto", action="store_true", help="only the design chosen leave-one-trace-out")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=RuntimeWarning)  # empty slices: series without a window
    if args.staleness:
        staleness(args.cache)
        return 0
    if args.loto:
        loto(args.cache)
        return 0
    data = {t: load(args.cache, t, args.source) for t in RULES}
    for trace, d in data.items():
        print(f"# {trace}: inner networks trained at windows {[t for _, t in d['per_origin']]}")  # type: ignore[index]
    print(f"held-out coverage 80 % / 95 % at {OUTER} origins; inner windows from the '{args.source}' networks")
    print("| design | Philly | Alibaba | sim | worst 80 % miss | worst 95 % miss |")
    for design in args.designs.split(","):
        got = {t: coverage(d, t, design) for t, d in data.items()}
        worst80 = max(abs(c[80] - 0.8) for c, _ in got.values())
        worst95 = max(abs(c[95] - 0.95) for c, _ in got.values())
        cells = " | ".join(f"{c[80]:.3f} / {c[95]:.3f}" for c, _ in got.values())
        print(f"| {design} | {cells} | {worst80:.3f} | {worst95:.3f} |", flush=True)
        for t, (_, per) in got.items():
            print(f"#   {design} {t} 80 % per origin: " + " ".join(f"{v:.2f}" for v in per))
    return 0


if __name__ == "__main__":
    sys.exit(main())
