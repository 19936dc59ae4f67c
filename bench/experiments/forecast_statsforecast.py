"""statsforecast's AutoETS, AutoTheta, AutoARIMA and MSTL scored at ``python -m bench.forecast``'s origins.

Why: statsforecast is the field's reference for these models; this measures whether it should replace
statsmodels where it is faster or more accurate. statsforecast 2.1.1 declares ``pandas<3.0.0`` and the
project runs pandas 3.1 (``make setup`` runs ``pip check``), so it cannot be a project dependency; it is
measured from a side venv (python 3.11, statsforecast 2.1.1, pandas 2.3). The project's cached backtest
records are pickles written under pandas 3, which pandas 2 may not load. Hence two interpreters, one
subcommand each:

  export (project venv): per trace, the regularised hourly history (``models.forecast.prep.regularize``, the
      grid every project model fits on) and the scored points of ``bench.forecast`` (windows 0..outer-1 of
      the cached ``{trace}-{model}-w29.pkl`` records: series, origin, lead, actual and each project
      baseline's forecast) as CSV under --work; also times the project's ``ETSForecaster`` on one origin × all
      series of ``sim`` (and checks it against the cached ets records there). Gaps are filled as regularize
      fills them (linear inside, nearest at the edges); these traces have none.
  score (side venv): fits each statsforecast model per series per origin on the history up to the origin,
      forecasts 168 h with 80/95 % bands, tidies them as the project does (clip at 0, nested bands), and
      prints per trace MAE (GPUs), MAE ÷ best project baseline (below 1: better than every project
      baseline), 80/95 % coverage and seconds per fit.

Usage, from the repository root:
  .venv/bin/python -m bench.experiments.forecast_statsforecast export --work /tmp/sfbench
  <side venv>/bin/python -m bench.experiments.forecast_statsforecast score --work /tmp/sfbench --jobs 2

AutoARIMA's default search costs minutes per fit on these series (season 24), hours for the benchmark, so
its search is capped (``ARIMA_CAP``: max_p/max_q 5 → 2, max_P/max_Q 2 → 1, max_order 5 → 4, approximation
on, at most 20 models). statsforecast 2 has no numba: its one-off cost is the import and the first fit of
each model, done in each worker before any timed fit and reported apart. ``SeasonalNaive24`` must reproduce
the project's seasonal_naive_24 exactly: the check that origins align. ``ETS_AAdN`` is statsforecast's ETS
with the project's ets model (A, Ad, N), for a like-for-like comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
H, LEVELS, OUTER, WINDOWS = 168, (80, 95), 8, 29  # bench.forecast: h, levels, --outer 8, its w29 records
BASELINES = (
    "naive",
    "drift",
    "window_mean_24",
    "window_mean_168",
    "seasonal_mean_24",
    "seasonal_median_24",
    "seasonal_naive_24",
    "seasonal_naive_168",
    "ets",
)
BANDS = ("mean", *(f"{s}-{lvl}" for lvl in LEVELS for s in ("lo", "hi")))
ARIMA_CAP = {"max_p": 2, "max_q": 2, "max_P": 1, "max_Q": 1, "max_order": 4, "approximation": True, "nmodels": 20}
REPEATS = 3  # the speed comparison's repeats (best reported: the least disturbed by other work on the cores)
SF_MODELS = ("AutoETS", "AutoTheta", "AutoARIMA", "MSTL", "ETS_AAdN", "SeasonalNaive24", "HistoricAverage")


# ---------------------------------------------------------------- export (project venv, pandas 3)


def export(work: Path, data: Path, cache: Path, traces: list[str], outer: int) -> None:
    # imported here, not at the top: ``score`` runs in a side venv that has neither pandas 3 nor the project
    from bench.forecast_cache import code_digest
    from bench.forecast_traces import load_traces
    from models.forecast.prep import regularize

    work.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {"cache": str(cache), "cache_digest": (cache / "CODE_DIGEST").read_text().strip()}
    meta["code_digest"] = code_digest()
    for trace, frame in load_traces(data, traces).items():
        series = regularize(frame)
        history = pd.concat(
            [pd.DataFrame({"series_id": s.series_id, "timestamp": s.index(), "value": s.values}) for s in series]
        )
        history.to_csv(work / f"{trace}-history.csv", index=False)
        points: pd.DataFrame | None = None
        meta[trace] = {"imputed": int(sum((~s.observed).sum() for s in series))}
        for model in BASELINES:
            records, seconds, fits = pickle.loads((cache / f"{trace}-{model}-w{WINDOWS}.pkl").read_bytes())
            pairs = int(records[["series_id", "window"]].drop_duplicates().shape[0])
            meta[trace][model] = {"seconds": float(seconds), "fits": int(fits), "series_fits": pairs}
            rec = records[records["window"] < outer].rename(columns={c: f"{model}:{c}" for c in BANDS})
            keep = ["series_id", "window", "lead", "timestamp", "actual", *(f"{model}:{c}" for c in BANDS)]
            if points is None:
                points = rec[keep]
            else:
                merged = points.merge(rec[keep], on=["series_id", "window", "lead"], validate="1:1")
                assert len(merged) == len(points), f"{trace}/{model}: records do not align"
                assert (merged["timestamp_x"] == merged["timestamp_y"]).all()
                points = merged.drop(columns=["timestamp_y", "actual_y"]).rename(
                    columns={"timestamp_x": "timestamp", "actual_x": "actual"}
                )
        assert points is not None
        first = points[points["lead"] == 1].set_index(["series_id", "window"])["timestamp"]
        points["origin"] = [
            first[(s, w)] - pd.Timedelta(hours=1) for s, w in zip(points["series_id"], points["window"], strict=True)
        ]
        points.to_csv(work / f"{trace}-points.csv", index=False)
        if trace == "sim":
            meta["project_ets_sim_w0"] = _time_project_ets(frame, points)
    (work / "meta.json").write_text(json.dumps(meta, indent=1))
    print(f"exported {', '.join(traces)} to {work} (cache digest {meta['cache_digest']}, code {meta['code_digest']})")


def _time_project_ets(frame: pd.DataFrame, points: pd.DataFrame) -> dict[str, Any]:
    """The project's ETSForecaster on window 0 of sim (every series in one fit call), as bench.forecast fits
    it, best of ``REPEATS``; one BLAS thread, as the statsforecast side (two on two shared cores ran ~3× slower)."""
    from threadpoolctl import threadpool_limits

    from models.forecast.statistical import ETSForecaster

    origins = points[points["window"] == 0].groupby("series_id")["origin"].first()
    train = frame[frame["timestamp"] <= frame["series_id"].map(origins)]
    runs = []
    with threadpool_limits(1):
        ETSForecaster().fit(train.head(200)).predict(H, level=LEVELS)  # imports and first fit, not timed
        for _ in range(REPEATS):
            wall, cpu = time.perf_counter(), time.process_time()
            forecast = ETSForecaster().fit(train).predict(H, level=LEVELS)
            runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    cached = points[points["window"] == 0].sort_values(["series_id", "lead"])["ets:mean"].to_numpy()
    diff = float(np.max(np.abs(forecast.sort_values(["series_id", "timestamp"])["mean"].to_numpy() - cached)))
    return {"series": int(origins.size), "runs": runs, "max_abs_diff_vs_cache": diff}


# ---------------------------------------------------------------- score (side venv, pandas 2)


def _model(name: str, n: int) -> Any:
    from statsforecast.models import MSTL, AutoARIMA, AutoETS, AutoTheta, HistoricAverage, SeasonalNaive

    if name == "AutoETS":
        return AutoETS(season_length=24)
    if name == "AutoTheta":
        return AutoTheta(season_length=24)
    if name == "AutoARIMA":
        return AutoARIMA(season_length=24, **ARIMA_CAP)
    if name == "MSTL":  # as the project's MSTL: a period needs more than two full cycles of history
        periods = [p for p in (24, 168) if n > 2 * p]
        return MSTL(season_length=periods, trend_forecaster=AutoETS(model="ZZN"))
    if name == "ETS_AAdN":  # the project's ets model, for a like-for-like comparison
        return AutoETS(model="AAN", damped=True)
    if name == "SeasonalNaive24":  # must equal the project's seasonal_naive_24 mean: an alignment check
        return SeasonalNaive(season_length=24)
    if name == "HistoricAverage":
        return HistoricAverage()
    raise ValueError(f"unknown model {name!r} (known: {', '.join(SF_MODELS)})")


def _tidy(out: dict[str, np.ndarray], fallback: float) -> dict[str, np.ndarray]:
    """As ``models.forecast.base._tidy``: NaN mean → last value, clip at 0, bands nested around the mean."""
    mean = np.clip(np.where(np.isfinite(out["mean"]), out["mean"], fallback), 0.0, None)
    tidy = {"mean": mean}
    lo_prev, hi_prev = mean, mean
    for lvl in LEVELS:
        lo = np.where(np.isfinite(out[f"lo-{lvl}"]), out[f"lo-{lvl}"], mean)
        hi = np.where(np.isfinite(out[f"hi-{lvl}"]), out[f"hi-{lvl}"], mean)
        lo_prev = tidy[f"lo-{lvl}"] = np.clip(np.minimum(lo, lo_prev), 0.0, None)
        hi_prev = tidy[f"hi-{lvl}"] = np.maximum(hi, hi_prev)
    return tidy


_WARMUP: dict[str, float] = {}


def _warm() -> None:
    """Per worker: one BLAS thread, then imports and a first fit of every model, timed apart from the run."""
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:
        pass
    started = time.perf_counter()
    import statsforecast.models  # noqa: F401

    _WARMUP["import"] = time.perf_counter() - started
    t = np.arange(400)
    y = 50 + 10 * np.sin(2 * np.pi * t / 24) + np.random.default_rng(0).normal(0, 1, t.size)
    for name in SF_MODELS:
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _model(name, y.size).forecast(y=y, h=H, level=list(LEVELS))
        _WARMUP[name] = time.perf_counter() - started


def _fit(task: tuple[str, str, int, str, np.ndarray]) -> dict[str, Any]:
    trace, sid, window, name, y = task
    wall, cpu = time.perf_counter(), time.process_time()
    error = ""
    try:
        with warnings.catch_warnings():  # AutoARIMA warns on convergence at most fits
            warnings.simplefilter("ignore")
            raw = _model(name, y.size).forecast(y=y, h=H, level=list(LEVELS))
        out = _tidy({k: np.asarray(raw[k], dtype="float64") for k in BANDS}, float(y[-1]))
    except Exception as exc:  # recorded and counted, never scored as a persistence forecast
        error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        out = {k: np.full(H, np.nan) for k in BANDS}
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"key": (trace, sid, window, name), "out": out, "wall": wall, "cpu": cpu, "error": error,
            "pid": os.getpid(), "warmup": dict(_WARMUP)}  # fmt: skip


def _tasks(work: Path, trace: str, models: list[str]) -> list[tuple[str, str, int, str, np.ndarray]]:
    history = pd.read_csv(work / f"{trace}-history.csv", parse_dates=["timestamp"])
    points = pd.read_csv(work / f"{trace}-points.csv", parse_dates=["origin"])
    tasks = []
    origins = points.groupby(["series_id", "window"])["origin"].first()
    for (sid, window), origin in zip(origins.index.tolist(), origins.tolist(), strict=True):
        h = history[history["series_id"] == sid]
        y = h.loc[h["timestamp"] <= origin, "value"].to_numpy(float)
        assert h["timestamp"].iloc[y.size - 1] == origin
        tasks += [(trace, str(sid), int(window), name, y) for name in models]
    return tasks


def score(work: Path, traces: list[str], models: list[str], jobs: int, reuse: bool) -> None:
    started = time.perf_counter()
    meta = json.loads((work / "meta.json").read_text())
    done_path = work / "sf-results.pkl"
    if reuse and done_path.is_file():
        results, pool_wall = pickle.loads(done_path.read_bytes())
    else:
        tasks = [t for trace in traces for t in _tasks(work, trace, models)]
        order = {name: i for i, name in enumerate(SF_MODELS)}  # slow models first, for load balance
        tasks.sort(key=lambda t: order[t[3]])
        pool_wall = time.perf_counter()
        with ProcessPoolExecutor(jobs, initializer=_warm) as pool:
            results = list(pool.map(_fit, tasks, chunksize=4))
        pool_wall = time.perf_counter() - pool_wall
        done_path.write_bytes(pickle.dumps((results, pool_wall)))
    by_key = {r["key"]: r for r in results}
    for trace in traces:
        _report_trace(work, trace, models, by_key, meta[trace])
    _report_speed(work, results, meta, models)
    print(f"ARIMA search cap: season_length=24, {ARIMA_CAP}, stepwise=True")
    print(
        f"fits: {len(results)} in {pool_wall:.1f} s wall with --jobs {jobs} (worker imports and first fits "
        f"included), {sum(r['cpu'] for r in results):.1f} s cpu in the fits themselves"
        + ("; reused from the last run" if reuse else "")
    )
    print(f"score step wall time: {time.perf_counter() - started:.1f} s")


def _metrics(points: pd.DataFrame, prefix: str) -> dict[str, float]:
    actual, mean = points["actual"].to_numpy(float), points[f"{prefix}mean"].to_numpy(float)
    ok = np.isfinite(actual) & np.isfinite(mean)
    row = {"mae": float(np.mean(np.abs(actual - mean)[ok])), "points": int(ok.sum())}
    for lvl in LEVELS:
        lo, hi = points[f"{prefix}lo-{lvl}"].to_numpy(float), points[f"{prefix}hi-{lvl}"].to_numpy(float)
        row[f"cov{lvl}"] = float(np.mean(((actual >= lo) & (actual <= hi))[ok]))
    return row


def _report_trace(work: Path, trace: str, models: list[str], by_key: dict[Any, Any], meta: dict[str, Any]) -> None:
    points = pd.read_csv(work / f"{trace}-points.csv").sort_values(["series_id", "window", "lead"])
    rows: dict[str, dict[str, Any]] = {}
    for model in BASELINES:
        rows[model] = _metrics(points, f"{model}:")
        m = meta[model]  # the cached run's seconds cover all WINDOWS origins, every series at each
        rows[model] |= {"s/fit": m["seconds"] / m["series_fits"], "s total": m["seconds"], "fits": m["series_fits"]}
    pairs = points.groupby(["series_id", "window"], sort=True).size().index
    for name in models:
        fits = [by_key[(trace, str(s), int(w), name)] for s, w in pairs]
        assert len(points) == H * len(fits), f"{trace}: a scored window without all {H} leads"
        for col in BANDS:
            points[f"sf:{col}"] = np.concatenate([f["out"][col] for f in fits])
        wall = np.array([f["wall"] for f in fits])
        rows[f"sf {name}"] = _metrics(points, "sf:") | {
            "s/fit": float(wall.mean()),
            "cpu s/fit": float(np.mean([f["cpu"] for f in fits])),
            "s total": float(wall.sum()),
            "fits": len(fits),
            "failed": sum(bool(f["error"]) for f in fits),
        }
        if name == "SeasonalNaive24":
            gap = np.nanmax(np.abs(points["sf:mean"] - points["seasonal_naive_24:mean"]))
            print(f"{trace}: alignment check, |sf SeasonalNaive24 - project seasonal_naive_24| max {gap:.2e}")
        for f in fits:
            if f["error"]:
                print(f"{trace}: {name} failed on {f['key'][1]} window {f['key'][2]}: {f['error']}")
    best = min(BASELINES, key=lambda m: rows[m]["mae"])
    table = pd.DataFrame(rows).T
    table["mae/best"] = table["mae"] / rows[best]["mae"]
    for c in ("fits", "failed", "points"):
        table[c] = table[c].map(lambda v: "-" if pd.isna(v) else str(int(v)))
    cols = ["mae", "mae/best", "cov80", "cov95", "s/fit", "cpu s/fit", "s total", "fits", "failed", "points"]
    print(f"\n## {trace}: {points['series_id'].nunique()} series × {points['window'].nunique()} origins, h={H}; "
          f"best project baseline {best} (MAE {rows[best]['mae']:.3f}); imputed hours {meta['imputed']}")  # fmt: skip
    print(table[cols].sort_values("mae").to_string(float_format=lambda v: f"{v:.3f}", na_rep="-"))
    print(
        "s/fit: wall seconds per series per origin (sf rows: this run, with its cpu seconds; project rows: the "
        f"cached bench.forecast run over its {WINDOWS} windows, fit and predict, no cpu recorded)"
    )


def _report_speed(work: Path, results: list[dict[str, Any]], meta: dict[str, Any], models: list[str]) -> None:
    warm = {r["pid"]: r["warmup"] for r in results}
    for pid, w in sorted(warm.items()):
        print(f"worker {pid}: import statsforecast.models {w.get('import', float('nan')):.2f} s; first fits "
              + ", ".join(f"{k} {v:.2f} s" for k, v in w.items() if k != "import"))  # fmt: skip
    project = meta.get("project_ets_sim_w0")
    if project:
        print(
            f"project ETSForecaster, sim window 0, {project['series']} series in one fit call: "
            + _runs(project["runs"])
            + f"; |forecast - cached ets| max {project['max_abs_diff_vs_cache']:.2e}"
        )
    for name in ("AutoETS", "ETS_AAdN"):
        if name not in models:
            continue
        _warm()  # this process's own imports and first fits, untimed
        sim = [t for t in _tasks(work, "sim", [name]) if t[2] == 0]
        runs = []
        for _ in range(REPEATS):
            wall, cpu = time.perf_counter(), time.process_time()
            for task in sim:
                _fit(task)
            runs.append((time.perf_counter() - wall, time.process_time() - cpu))
        print(f"statsforecast {name}, sim window 0, {len(sim)} series one after another: " + _runs(runs))


def _runs(runs: list[tuple[float, float]]) -> str:
    wall, cpu = min(runs)
    every = ", ".join(f"{w:.2f}" for w, _ in runs)
    return f"best of {len(runs)} wall {wall:.2f} s (cpu {cpu:.2f} s; every run {every} s)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    ex = sub.add_parser("export", help="project venv: histories and scored points to --work")
    sc = sub.add_parser("score", help="statsforecast venv: fit, score and print")
    for p in (ex, sc):
        p.add_argument("--work", type=Path, default=Path("/tmp/sfbench"))
        p.add_argument("--traces", default="philly,alibaba,sim,sim2,sim3")
    ex.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ex.add_argument("--cache", type=Path, default=Path("/tmp/bench-forecast-cache"), help="bench.forecast's records")
    ex.add_argument("--outer", type=int, default=OUTER, help="scored windows per trace (newest first)")
    sc.add_argument("--jobs", type=int, default=2)
    sc.add_argument("--models", default=",".join(SF_MODELS))
    sc.add_argument("--reuse", action="store_true", help="report on the last run's fits instead of refitting")
    args = parser.parse_args(argv)
    traces = [t.strip() for t in args.traces.split(",") if t.strip()]
    if args.step == "export":
        export(args.work, args.data, args.cache, traces, args.outer)
    else:
        score(args.work, traces, [m.strip() for m in args.models.split(",") if m.strip()], args.jobs, args.reuse)
    return 0


if __name__ == "__main__":
    sys.exit(main())
