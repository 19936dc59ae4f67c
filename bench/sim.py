"""Benchmark: 5 simulated weeks of a 64-node (512-GPU) cluster replaying the Philly table.

Prints simulated hours per second and peak memory (RSS) of the run, the OpenMetrics size, the time
``promtool`` needs to backfill it, and the simulated cluster allocation next to Philly's
``demand_hourly.csv`` (same order of magnitude and weekly shape; the simulator adds queueing, and its
512 GPUs saturate where Philly's 2,490 did not).

    python -m bench.sim [--step 1m] [--metrics all] [--om-step 15m] [--om-metrics core]

Two passes over the same seed: (1) the full run at ``--step`` with every family generated and counted
but not written (the simulator's own throughput; at 1 min this is ~0.4 G samples, tens of GB of text);
(2) the same run at ``--om-step`` written as OpenMetrics and backfilled with promtool (disk and promtool
throughput bound).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from predictor import sim
from predictor.timeparse import parse_duration
from tests.support.localprom import backfill, prometheus_available

REPO = Path(__file__).resolve().parents[1]

SHARED = REPO.parent / "shared" / "data" / "philly"
START = pd.Timestamp("2017-10-02", tz="UTC")  # first Monday of Philly's demand_hourly.csv


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _settings(step: pd.Timedelta, metrics: str, weeks: float, faults: float) -> sim.SimSettings:
    return sim.SimSettings(
        start=START, weeks=weeks, step_s=int(step.total_seconds()), seed=1, fault_rate_per_day=faults, metrics=metrics
    )


def _generate(result: sim.SimResult) -> int:
    """Generate every series of every family (what a writer consumes), without formatting it."""
    samples = 0
    for family in result.families():
        for _, steps, values in family.series():
            samples += int(np.isfinite(values).sum()) if len(steps) else 0
    return samples


def _compare(result: sim.SimResult, demand_path: Path) -> Table:
    demand = pd.read_csv(demand_path, parse_dates=["timestamp"])
    philly = demand[demand["series_id"] == "philly/cluster"].set_index("timestamp")["gpus_demanded"]
    # demand_hourly is in Philly's local (US/Pacific) wall-clock hours; compare on UTC hours.
    philly.index = philly.index.tz_localize("US/Pacific", ambiguous=False, nonexistent="shift_forward").tz_convert(
        "UTC"
    )
    summary = result.summary.set_index("timestamp")
    sim_alloc = summary["allocated_gpus"].resample("h").mean()
    sim_demand = (summary["allocated_gpus"] + summary["pending_gpus"]).resample("h").mean()
    joined = pd.DataFrame({"philly": philly, "sim_alloc": sim_alloc, "sim_demand": sim_demand}).dropna()
    table = Table(title="cluster GPUs: Philly demand_hourly (zero-wait demand, 2,490 GPUs) vs simulated (512 GPUs)")
    for column in ("week (UTC)", "Philly demand mean", "sim allocated mean", "sim alloc+pending mean"):
        table.add_column(column, justify="right")
    for week, part in joined.groupby(pd.Grouper(freq="W-SUN")):
        table.add_row(
            str(week.date()),
            f"{part['philly'].mean():.0f}",
            f"{part['sim_alloc'].mean():.0f}",
            f"{part['sim_demand'].mean():.0f}",
        )
    how = joined.groupby([joined.index.day_of_week]).mean()
    shape = how.corr().loc["philly"]
    hourly = joined.groupby(joined.index.day_of_week * 24 + joined.index.hour).mean().corr().loc["philly"]
    table.add_row(
        "all",
        f"{joined['philly'].mean():.0f}",
        f"{joined['sim_alloc'].mean():.0f}",
        f"{joined['sim_demand'].mean():.0f}",
    )
    table.add_row("corr by weekday", "1", f"{shape['sim_alloc']:.2f}", f"{shape['sim_demand']:.2f}")
    table.add_row("corr by hour-of-week", "1", f"{hourly['sim_alloc']:.2f}", f"{hourly['sim_demand']:.2f}")
    table.add_row(
        "corr hourly series",
        "1",
        f"{joined.corr().loc['philly', 'sim_alloc']:.2f}",
        f"{joined.corr().loc['philly', 'sim_demand']:.2f}",
    )
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=Path, default=SHARED / "jobs.csv")
    parser.add_argument("--demand", type=Path, default=SHARED / "demand_hourly.csv")
    parser.add_argument("--weeks", type=float, default=5.0)
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--step", default="1m", help="step of the generation pass")
    parser.add_argument("--metrics", default="all", help="families of the generation pass")
    parser.add_argument("--om-step", default="15m", help="step of the OpenMetrics + promtool pass")
    parser.add_argument("--om-metrics", default="core", help="families of the OpenMetrics + promtool pass")
    parser.add_argument("--faults", type=float, default=3.0, help="faults per day")
    parser.add_argument("--skip-om", action="store_true", help="skip the OpenMetrics + promtool pass")
    args = parser.parse_args()
    console = Console(width=170)
    if not args.jobs.is_file():
        console.print(f"Philly table not found at {args.jobs}; pass --jobs")
        return 1
    jobs = sim.load_jobs(args.jobs)
    cluster = sim.ClusterSpec.uniform(args.nodes)
    hours = args.weeks * 7 * 24
    table = Table(title=f"predictor.sim: Philly, {args.weeks:g} weeks, {cluster.n_gpus} GPUs, seed 1")
    for column in ("pass", "step", "families", "samples", "seconds", "sim-hours/s", "peak RSS MiB", "notes"):
        table.add_column(column, justify="right")

    t0 = time.perf_counter()
    result = sim.simulate(jobs, cluster, _settings(parse_duration(args.step), args.metrics, args.weeks, args.faults))
    t_sched = time.perf_counter() - t0
    samples = _generate(result)
    elapsed = time.perf_counter() - t0
    table.add_row(
        "generate",
        args.step,
        args.metrics,
        f"{samples:,}",
        f"{elapsed:.1f}",
        f"{hours / elapsed:.1f}",
        f"{_peak_rss_mib():,.0f}",
        f"schedule+occupancy {t_sched:.1f} s; {len(result.jobs_out):,} attempts",
    )
    totals = sim.summary_totals(result.summary, result.schedule.attempts)

    if not args.skip_om:
        with tempfile.TemporaryDirectory(prefix="bench-sim-") as tmp:
            om = Path(tmp) / "metrics.om"
            t0 = time.perf_counter()
            small = sim.simulate(
                jobs, cluster, _settings(parse_duration(args.om_step), args.om_metrics, args.weeks, args.faults)
            )
            written = sim.write_openmetrics(om, small.families(), small.grid)
            elapsed = time.perf_counter() - t0
            size = om.stat().st_size
            table.add_row(
                "openmetrics",
                args.om_step,
                args.om_metrics,
                f"{written:,}",
                f"{elapsed:.1f}",
                f"{hours / elapsed:.1f}",
                f"{_peak_rss_mib():,.0f}",
                f"{size / 2**20:,.0f} MiB, {size / max(written, 1):.0f} B/sample",
            )
            if prometheus_available():
                seconds = backfill(om, Path(tmp) / "tsdb")
                table.add_row(
                    "promtool backfill",
                    args.om_step,
                    args.om_metrics,
                    f"{written:,}",
                    f"{seconds:.1f}",
                    f"{hours / seconds:.1f}",
                    "-",
                    f"{written / seconds:,.0f} samples/s",
                )
            else:
                table.add_row("promtool backfill", "-", "-", "-", "-", "-", "-", "promtool not installed")
    console.print(table)
    run = Table(title="what the scheduler did (generation pass)")
    run.add_column("measure")
    run.add_column("value", justify="right")
    for name, value in totals.items():
        run.add_row(name, f"{value:,.2f}")
    run.add_row("faults injected", str(len(result.faults)))
    console.print(run)
    if args.demand.is_file():
        console.print(_compare(result, args.demand))
    return 0


if __name__ == "__main__":
    sys.exit(main())
