"""Benchmark: export 5 weeks × 64 series at 1 m from a real local Prometheus.

Prints the time of ``PrometheusSource.query_range`` (prometheus-api-client, chunking, retries, frame
building) next to a plain ``requests`` loop over the same chunked queries with JSON decoding only,
measured in the same run against the same server, and their ratio.

    python -m bench.export [--weeks 5] [--series 64] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import requests
from rich.console import Console
from rich.table import Table

from predictor.config import PrometheusSettings
from predictor.sources.prometheus import PrometheusSource, chunk_ranges
from tests.support.localprom import LocalPrometheus, backfill, prometheus_available

REPO = Path(__file__).resolve().parents[1]

STEP_S = 60
START = int(pd.Timestamp("2026-09-01T00:00:00Z").timestamp())


def write_history(path: Path, weeks: int, series: int) -> int:
    rng = np.random.default_rng(0)
    stamps = np.arange(START, START + weeks * 7 * 86400 + 1, STEP_S)
    with path.open("w", encoding="utf-8") as out:
        out.write("# TYPE gcp_bench_gpu_util gauge\n")
        for i in range(series):
            values = np.round(rng.uniform(0, 100, len(stamps)), 2)
            head = f'gcp_bench_gpu_util{{gpu="{i % 8}",node="node-{i // 8:02d}"}}'
            out.write("".join(f"{head} {v} {t}\n" for v, t in zip(values.tolist(), stamps.tolist(), strict=True)))
        out.write("# EOF\n")
    return len(stamps) * series


def raw_loop(
    url: str, query: str, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta, *, to_arrays: bool = False
) -> int:
    samples = 0
    with requests.Session() as session:
        for lo, hi in chunk_ranges(start, end, step, 11_000):
            answer = session.get(
                f"{url}/api/v1/query_range",
                params={
                    "query": query,
                    "start": int(lo.timestamp()),
                    "end": int(hi.timestamp()),
                    "step": int(step.total_seconds()),
                },
                timeout=120,
            )
            answer.raise_for_status()
            for result in answer.json()["data"]["result"]:
                values = result["values"]
                samples += len(values)
                if to_arrays:  # the least any consumer must do: numbers out of the JSON strings
                    np.fromiter((v[0] for v in values), dtype="float64", count=len(values))
                    np.array([v[1] for v in values]).astype("float64")
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weeks", type=int, default=5)
    parser.add_argument("--series", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    console = Console()
    if not prometheus_available():
        console.print("prometheus/promtool not installed (Debian package 'prometheus')")
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-export-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        total = write_history(work / "history.om", args.weeks, args.series)
        generate_s = time.perf_counter() - t0
        backfill_s = backfill(work / "history.om", work / "tsdb")
        (work / "history.om").unlink()
        start = pd.Timestamp(START, unit="s", tz="UTC")
        end = start + pd.Timedelta(weeks=args.weeks)
        step = pd.Timedelta(seconds=STEP_S)
        query = "gcp_bench_gpu_util"
        with LocalPrometheus(work / "tsdb") as prom:
            source = PrometheusSource(PrometheusSettings(url=prom.url, timeout_s=300))  # type: ignore[call-arg]
            raw_loop(prom.url, query, start, end, step)  # warm the server's caches once
            raw_times, array_times, source_times = [], [], []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                raw_samples = raw_loop(prom.url, query, start, end, step)
                raw_times.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                raw_loop(prom.url, query, start, end, step, to_arrays=True)
                array_times.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                frame = source.query_range(query, start, end, step)
                source_times.append(time.perf_counter() - t0)
    assert len(frame) == raw_samples == total, (len(frame), raw_samples, total)
    chunks = len(chunk_ranges(start, end, step, 11_000))
    table = Table(title=f"export: {args.weeks} weeks × {args.series} series at 1 m = {total:,} samples")
    for column in ("path", "requests", "best s", "median s", "samples/s", "ratio to raw"):
        table.add_column(column, justify="right")
    raw_best, src_best = min(raw_times), min(source_times)
    table.add_row(
        "requests + json (baseline)",
        str(chunks),
        f"{raw_best:.2f}",
        f"{np.median(raw_times):.2f}",
        f"{total / raw_best:,.0f}",
        "1.00",
    )
    arr_best = min(array_times)
    table.add_row(
        "requests + json + float arrays",
        str(chunks),
        f"{arr_best:.2f}",
        f"{np.median(array_times):.2f}",
        f"{total / arr_best:,.0f}",
        f"{arr_best / raw_best:.2f}",
    )
    table.add_row(
        "PrometheusSource → frame",
        str(chunks),
        f"{src_best:.2f}",
        f"{np.median(source_times):.2f}",
        f"{total / src_best:,.0f}",
        f"{src_best / raw_best:.2f}",
    )
    console.print(table)
    console.print(f"generate OpenMetrics {generate_s:.1f} s · promtool backfill {backfill_s:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
