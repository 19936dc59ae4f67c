"""``lstm_global`` for ``python -m bench.forecast``: one LSTM trained on the *other* traces, serving the held-out one.

Why: the 7-day model can be one network trained across all series of all training traces, judged on a trace
it never saw. ``lstm`` in the bench is retrained at every origin on the held-out trace's own history;
``lstm_global`` is the opposite end: for each held-out trace one ``LSTMForecaster`` is fitted once on every
series of the other traces (their full histories: those are training traces), with no fine-tuning on the
held-out trace, and every origin of the held-out trace (scored and inner) is forecast through ``update``
(``FrozenForecaster``): the frozen network fed the held-out history up to that origin. Nothing at or after an
origin is seen, and nothing of the held-out trace is trained on at all, so its records exist at every origin
and it is a full candidate of every ``auto`` rule, per-series ones too.

Per-series scaling (each series divided by its mean over the window it is served from) and calendar
features are the LSTM's own; the traces' scales differ by three orders of magnitude (Alibaba's ``HN_all``
~3,000 GPUs, ``openb2023/BE`` ~2), which the scaling is meant to absorb.

Standalone, it fills the cache ``python -m bench.forecast`` reads and prints the trainings' cost:
    python -m bench.forecast_global [--traces philly,alibaba,sim] [--windows 29] [--cache DIR]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from bench.forecast_traces import load_traces
from models.forecast import run_backtest
from models.forecast.frozen import FrozenForecaster
from models.forecast.lstm import LSTMForecaster

REPO = Path(__file__).resolve().parents[1]

GLOBAL = ("lstm_global",)
# Every training origin of the other traces (≤ ~36k) is used: the network is trained three times in all,
# not once per origin, so the 20k cap the per-trace LSTM uses to bound its cost is not needed here.
MAX_SAMPLES = 60_000
# auto's pools with the global network as a member, scored like bench.forecast's own.
GLOBAL_POOLS = {
    "w168+sm24+ets+lstm_global": ("window_mean_168", "seasonal_mean_24", "ets", "lstm_global"),
    "n+d+lstm_global": ("naive", "drift", "lstm_global"),
    "lstm+lstm_global": ("lstm", "lstm_global"),
}
GLOBAL_WEIGHTED = tuple(
    (("lstm_global", *rest), (w, *[round((1 - w) / len(rest), 3)] * len(rest)))
    for rest in (("naive",), ("drift",), ("ets",), ("naive", "drift"), ("naive", "ets"), ("lstm",))
    for w in (0.3, 0.5, 0.6, 0.7, 0.8, 0.9)
)


def global_net(held: str, others: dict[str, pd.DataFrame], cache: Path) -> tuple[LSTMForecaster, dict[str, Any]]:
    """The network for held-out ``held``: fitted on every series of ``others`` (cached), and a note on its fit."""
    path = cache / f"{held}-lstm_global-net.pkl"
    if path.is_file():
        net, note = pickle.loads(path.read_bytes())
        return net, note
    started = time.perf_counter()
    net = LSTMForecaster(max_samples=MAX_SAMPLES)
    net.fit(pd.concat(list(others.values()), ignore_index=True))
    note = {
        "trained_on": sorted(others),
        "train_s": time.perf_counter() - started,
        "epochs": net.epochs_,
        "best_val_loss": net.best_val_loss_,
    }
    path.write_bytes(pickle.dumps((net, note)))
    return net, note


def backtest_global(
    job: tuple[str, pd.DataFrame, dict[str, pd.DataFrame], int, Path, int, int, tuple[int, ...]],
) -> tuple[str, pd.DataFrame, float, int]:
    """``bench.forecast``'s ``(model, records, seconds, fits)`` for ``lstm_global`` on the held-out trace.

    ``seconds`` is the training plus every origin's ``update`` and forecast, so the bench's seconds per
    fit is the training amortised over the origins (the training alone is kept in the cache's note).
    """
    held, frame, others, windows, cache, horizon, step, levels = job
    path = cache / f"{held}-lstm_global-w{windows}.pkl"
    if path.is_file():
        records, seconds, fits, _note = pickle.loads(path.read_bytes())
        return "lstm_global", records, seconds, fits
    net, note = global_net(held, others, cache)
    result = run_backtest(
        frame,
        {"lstm_global": FrozenForecaster(net)},
        horizon=horizon,
        windows=windows,
        step=step,
        level=levels,
        min_train=240,
    )
    fits = int(result.records["window"].nunique())
    seconds = note["train_s"] + result.seconds["lstm_global"]
    note = {**note, "serve_s": result.seconds["lstm_global"]}
    path.write_bytes(pickle.dumps((result.records, seconds, fits, note)))
    return "lstm_global", result.records, seconds, fits


def global_jobs(
    traces: dict[str, pd.DataFrame], windows: int, cache: Path, horizon: int, step: int, levels: tuple[int, ...]
) -> list[tuple[str, pd.DataFrame, dict[str, pd.DataFrame], int, Path, int, int, tuple[int, ...]]]:
    """One job per held-out trace: that trace, and every other one to train on."""
    if len(traces) < 2:
        raise SystemExit("lstm_global needs at least two traces: it is trained on the ones not held out")
    return [
        (held, frame, {t: f for t, f in traces.items() if t != held}, windows, cache, horizon, step, levels)
        for held, frame in traces.items()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--traces", default="philly,alibaba,sim")
    parser.add_argument("--windows", type=int, default=29, help="origins per trace (bench.forecast: outer + 21)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/bench-forecast-cache"))
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    traces = load_traces(args.data, args.traces.split(","))
    for job in global_jobs(traces, args.windows, args.cache, 168, 24, (80, 95)):
        _, records, _seconds, fits = backtest_global(job)
        *_, note = pickle.loads((args.cache / f"{job[0]}-lstm_global-w{args.windows}.pkl").read_bytes())
        print(
            f"{job[0]}: trained on {', '.join(note['trained_on'])} in {note['train_s']:.0f} s "
            f"({note['epochs']} epochs, val pinball {note['best_val_loss']:.4f}); {fits} origins served in "
            f"{note['serve_s']:.1f} s; {len(records)} forecast points"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
