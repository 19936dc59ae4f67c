"""How long ``predictor forecast --model auto`` takes on many series (up to 1,000 series × 5 weeks).

Usage, from the repository root:
    python -m bench.forecast_speed [--series 20,100] [--weeks 5] [--model auto] [--baseline naive]
        [--lstm-bags K]

Series come from the benchmark's simulated queues (``bench.forecast_traces``: daily rhythm, level shifts,
drains), hourly. Each size runs ``pipelines.forecast.run_forecast`` (the code path of ``predictor forecast``)
for ``--model`` and for ``--baseline`` in the same process, and prints seconds and their ratio. Run small
sizes first; the full 1,000-series figure takes minutes on 2 cores. CPU seconds (this process and the
workers ``auto`` starts, ``models.forecast.parallel``) are printed beside wall seconds because on a shared
machine the wall time measures the neighbours too; ``load`` is the 1-minute load average at the end of the
run and ``workers`` the processes ``auto`` could use (``PREDICTOR_FORECAST_WORKERS``, else the cores).
``--lstm-bags K`` serves ``auto``'s LSTM candidate as ``LSTMForecaster(bags=K)`` (default: the model's own
number of bagged networks): what bagging costs, timed against the same baseline in the same run.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import pandas as pd

from bench.forecast_traces import simulated_trace
from models.forecast import LSTMForecaster
from models.forecast.parallel import available_workers
from pipelines.forecast import make_model, run_forecast

REPO = Path(__file__).resolve().parents[1]


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished children (the fit's workers end with it)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", default="20,100", help="comma-separated series counts")
    parser.add_argument("--weeks", type=int, default=5)
    parser.add_argument("--model", default="auto")
    parser.add_argument("--baseline", default="naive")
    parser.add_argument("--horizon", type=int, default=168)
    parser.add_argument(
        "--lstm-bags", type=int, default=None, help="LSTMForecaster(bags=K) inside --model (default: the model's own)"
    )
    args = parser.parse_args(argv)
    if args.lstm_bags is not None and args.lstm_bags < 1:
        parser.error(f"--lstm-bags must be a whole number of networks >= 1, not {args.lstm_bags}")
    rows = []
    for n in (int(x) for x in args.series.split(",") if x.strip()):
        history = simulated_trace(n_series=n, weeks=args.weeks, seed=11)
        seconds, cpu = {}, {}
        for name in (args.baseline, args.model):
            started, started_cpu = time.perf_counter(), cpu_seconds()
            if name == args.model and args.lstm_bags is not None:
                lstm = {"horizon": args.horizon, "bags": args.lstm_bags}
                model = make_model(name, horizon=args.horizon, params={"candidate_params": {"lstm": lstm}})
                forecast = model.fit(history).predict(args.horizon, level=(80, 95))
            else:
                forecast = run_forecast(history, model=name, horizon=args.horizon).forecast
            seconds[name] = time.perf_counter() - started
            cpu[name] = cpu_seconds() - started_cpu
            assert forecast["series_id"].nunique() == n
        rows.append(
            {
                "series": n,
                "points": len(history),
                f"{args.model} s": seconds[args.model],
                f"{args.model} cpu s": cpu[args.model],
                f"{args.baseline} s": seconds[args.baseline],
                "ratio": seconds[args.model] / seconds[args.baseline],
                f"{args.model} ms/series": 1000 * seconds[args.model] / n,
                "lstm bags": args.lstm_bags or LSTMForecaster().bags,
                "workers": available_workers(),
                "load": os.getloadavg()[0],
            }
        )
        print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.2f}"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
