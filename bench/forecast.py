"""Benchmark every forecaster and ``auto`` on the Philly demand trace with a rolling-origin backtest.

Usage: .venv/bin/python bench/forecast.py [PATH] [--value-col gpus_demanded] [--windows 4]

PATH defaults to ../shared/data/philly/demand_hourly.csv relative to the repository root. ``auto`` is
scored by replaying its selection on the cached candidate backtest (exact for step == horizon), so the
candidates are fitted ``windows + inner_windows`` times instead of ``windows × (inner_windows + 1)``.
Prints: one table over all series (MAE in GPUs, MASE, sMAPE %, pinball p50/p90, 80/95 % coverage,
seconds per origin), per-series MASE, and what ``auto`` chose at the newest origin.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from models.forecast import forecasters, records_for_auto, run_backtest, score_records, summarize  # noqa: E402
from models.forecast.auto import DEFAULT_CANDIDATES  # noqa: E402

DEFAULT_PATH = REPO.parent / "shared" / "data" / "philly" / "demand_hourly.csv"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--value-col", default="gpus_demanded")
    parser.add_argument("--horizon", type=int, default=168)
    parser.add_argument("--windows", type=int, default=4, help="outer origins that are scored")
    parser.add_argument("--inner-windows", type=int, default=3, help="origins auto selects on")
    parser.add_argument("--models", default=",".join(DEFAULT_CANDIDATES))
    parser.add_argument("--csv", type=Path, help="also write per-series metrics here")
    args = parser.parse_args(argv)
    if not args.path.is_file():
        print(
            f"bench/forecast.py: data file {args.path} not found; pass the path to demand_hourly.csv "
            "(Philly trace, see shared/data/README.md) as the first argument",
            file=sys.stderr,
        )
        return 2
    raw = pd.read_csv(args.path)
    frame = pd.DataFrame(
        {
            "series_id": raw["series_id"].astype(str),
            "timestamp": pd.to_datetime(raw["timestamp"], utc=True),
            "value": pd.to_numeric(raw[args.value_col], errors="coerce"),
        }
    )
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    models = {name: forecasters.create(name) for name in names}
    started = time.perf_counter()
    result = run_backtest(
        frame, models, horizon=args.horizon, windows=args.windows + args.inner_windows, step=args.horizon
    )
    auto = records_for_auto(result, args.windows, args.inner_windows)
    records = pd.concat([result.records[result.records["window"] < args.windows], auto], ignore_index=True)
    per_window = score_records(records, result.scales, result.levels)
    per_series = summarize(per_window)
    overall = summarize(per_series.assign(n=1, window=0), by=("model",))
    # coverage pooled over every scored point, not averaged over series
    pooled = summarize(per_window.assign(series_id="all"), by=("model",))
    for c in [c for c in overall.columns if c.startswith("coverage_")]:
        overall[c] = pooled[c].to_numpy()
    origins = args.windows + args.inner_windows
    seconds = {m: s / origins for m, s in result.seconds.items()}
    seconds["auto"] = sum(seconds.values()) * (args.inner_windows + 1)
    overall["sec/origin"] = overall["model"].map(seconds)
    overall = overall.drop(columns=["windows"]).sort_values("mase")
    wall = time.perf_counter() - started

    n_series = frame["series_id"].nunique()
    print(
        f"# {args.path.name}: {args.value_col}, {n_series} series, h={args.horizon}, "
        f"{args.windows} scored origins (step {args.horizon}), auto selects on {args.inner_windows} more"
    )
    print(overall.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print("\n# MASE per series (rows) and model (columns)")
    table = per_series.pivot(index="series_id", columns="model", values="mase")
    table["best_baseline"] = table[[c for c in table.columns if c not in ("lstm", "auto")]].idxmin(axis=1)
    print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    snaive = overall.set_index("model").loc["seasonal_naive_168"]
    a = overall.set_index("model").loc["auto"]
    baselines = overall[~overall["model"].isin(["auto", "lstm"])].set_index("model")
    print(
        f"\nauto vs seasonal_naive_168: MAE {a['mae']:.2f} vs {snaive['mae']:.2f} GPUs "
        f"({100 * (1 - a['mae'] / snaive['mae']):.1f}% lower), MASE {a['mase']:.3f} vs {snaive['mase']:.3f} "
        f"({100 * (1 - a['mase'] / snaive['mase']):.1f}% lower)"
    )
    for metric in ("mae", "mase", "pinball_p90"):
        best = baselines[metric].idxmin()
        low = baselines[metric].min()
        verdict = "no worse" if a[metric] <= low + 1e-12 else "WORSE"
        print(f"auto vs best single baseline by {metric} ({best}): {a[metric]:.3f} vs {low:.3f}: {verdict}")
    choices = auto[auto["window"] == 0].drop_duplicates("series_id").set_index("series_id")["choice"]
    print("\n# auto's choice at the newest origin\n" + choices.to_string())
    if result.skipped:
        print(f"\nskipped: {len(result.skipped)} (first: {result.skipped[0]})")
    if args.csv:
        per_series.to_csv(args.csv, index=False)
    print(f"\nwall time: {wall:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
