"""Does pre-training on other traces help the per-trace LSTM? ``lstm`` against ``lstm_global_ft``, origin by origin.

Why: ``lstm_global`` (``bench.forecast_global``) serves a held-out trace zero-shot; the product's LSTM is
refitted on its own cluster's history. The warm-start question sits between them: at each scored origin of
the held-out trace, ``LSTMForecaster(init_state=<the network trained on the other traces>)`` is fine-tuned
on the held-out history before that origin only (the same data ``lstm`` is trained on from scratch), with a
lower learning rate and fewer epochs (``FT_*``, set once, not tuned). Early stopping starts from the
pre-trained weights, so on a long series whose validation loss the fine-tuning does not improve, the
pre-trained network is what is served. Fits cost as much as ``lstm``'s, so only ``--origins`` are scored
(``bench.forecast``'s scored windows, 0 = newest), and the table compares every model at those origins only.

Usage, from the repository root (it reads ``lstm``'s and the baselines' records from the cache of
``python -m bench.forecast``: run that first):
    python -m bench.experiments.forecast_finetune [--origins 0,2,4,6] [--traces philly,alibaba,sim] [--cache DIR]

Output: per held-out trace, every model's MAE, 80 % coverage and MAE ÷ the best baseline's at those origins.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

import pandas as pd

from bench.forecast_global import global_jobs, global_net
from bench.forecast_traces import load_traces
from models.forecast import run_backtest
from models.forecast.lstm import LSTMForecaster

REPO = Path(__file__).resolve().parents[2]

H, STEP, LEVELS, WINDOWS = 168, 24, (80, 95), 29
FT_EPOCHS, FT_LR = 10, 1e-3
BASELINES = ("naive", "drift", "window_mean_24", "window_mean_168", "seasonal_mean_24", "ets")


def finetuned(held: str, frame: pd.DataFrame, others: dict[str, pd.DataFrame], cache: Path, w: int) -> pd.DataFrame:
    """``lstm_global_ft``'s records at window ``w`` of ``frame`` (cached)."""
    path = cache / f"{held}-lstm_global_ft-x{w}.pkl"
    if path.is_file():
        records: pd.DataFrame = pickle.loads(path.read_bytes())
        return records
    net, _ = global_net(held, others, cache)
    model = LSTMForecaster(init_state=net.net_.state_dict(), max_epochs=FT_EPOCHS, learning_rate=FT_LR)
    end = frame.groupby("series_id")["timestamp"].transform("max") - pd.Timedelta(hours=w * STEP)
    result = run_backtest(
        frame[frame["timestamp"] <= end],
        {"lstm_global_ft": model},
        horizon=H,
        windows=1,
        step=STEP,
        level=LEVELS,
        min_train=240,
    )
    records = result.records.assign(window=w)
    path.write_bytes(pickle.dumps(records))
    return records


def _cached(cache: Path, held: str, model: str) -> pd.DataFrame | None:
    for name in (f"{held}-{model}-w{WINDOWS}.pkl", f"{held}-{model}-w8.pkl"):
        if (cache / name).is_file():
            records: pd.DataFrame = pickle.loads((cache / name).read_bytes())[0]
            return records
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--traces", default="philly,alibaba,sim")
    parser.add_argument("--origins", default="0,2,4,6", help="scored windows to fine-tune at (0 = newest)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/bench-forecast-cache"))
    args = parser.parse_args(argv)
    origins = [int(o) for o in args.origins.split(",")]
    traces = load_traces(args.data, args.traces.split(","))
    for held, frame, others, *_ in global_jobs(traces, WINDOWS, args.cache, H, STEP, LEVELS):
        parts = [finetuned(held, frame, others, args.cache, w) for w in origins]
        for model in (*BASELINES, "lstm", "lstm_global"):
            records = _cached(args.cache, held, model)
            if records is not None:
                parts.append(records[records["window"].isin(origins)].assign(model=model))
        records = pd.concat(parts, ignore_index=True).dropna(subset=["actual"])
        err = (records["actual"] - records["mean"]).abs()
        inside = (records["actual"] >= records["lo-80"]) & (records["actual"] <= records["hi-80"])
        table = pd.DataFrame({"mae": err, "cov80": inside, "model": records["model"]}).groupby("model").mean()
        points = records.groupby("model").size()
        best = str(table.loc[[m for m in BASELINES if m in table.index], "mae"].idxmin())
        table["points"] = points
        table["mae/best_base"] = table["mae"] / float(table["mae"][best])
        print(f"\n## {held}: origins {origins}; best baseline {best}")
        print(table.sort_values("mae").to_string(float_format=lambda v: f"{v:.3f}"))
        if points.nunique() > 1:
            print(f"(models scored on different point counts: {points.to_dict()})")
    print(f"\nfine-tune: max_epochs {FT_EPOCHS}, learning rate {FT_LR}, from the network trained on the other traces")
    return 0


if __name__ == "__main__":
    sys.exit(main())
