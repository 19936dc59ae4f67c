"""The traces ``bench.replay`` measures on, and the windows each is cut into.

A window is ``[start, start + weeks)``; every replay also schedules the week before ``start`` as warm-up
(the static quotas' shares and the loop's first forecast come from it), so a window needs a week of jobs
before it.

- Philly (Microsoft, 2017, CC BY 4.0; Jeon et al., ATC'19): the 10 Monday–Sunday weeks from 2017-10-02
  (the span of the published hourly demand). Every 4-week window stepping one week: 7 windows. Philly's
  job file has no user or job name, so nothing recurs and ``rightsize+loop`` equals ``loop`` there.
- Alibaba (cluster-trace-gpu-v2025, the disaggregated DLRM GPU instances; research use): about 4.4 weeks
  of jobs, so its whole span after the warm-up week (about 3.4 weeks) is one window. Queues are the 10
  largest apps plus ``other``; an app is a recurring workload; instances alive at the end of the trace run
  until it (right-censored). The trace has no calendar: day 0 is mapped to 2026-01-05.
- ``recurring`` (``bench.replay_recurring``): synthetic, with daily jobs asking more GPUs than they use;
  ``synthetic``: the earlier synthetic trace (the simulator's recurring workload templates).

Seeds. A replay's seed draws the jobs' usage profiles only: how many of its GPUs each job keeps busy, its
utilisation and memory (the public traces record requests, not use). The scheduler is deterministic, so a
seed moves utilisation, goodput and what right-sizing recommends, and leaves allocation, waits, reclaims
and fragmentation unchanged for a policy that does not right-size.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from predictor.errors import InputError
from predictor.sim import load_jobs, normalise_jobs

__all__ = ["TRACES", "Trace", "Window", "alibaba", "load", "philly", "windows"]

WEEK = pd.Timedelta(days=7)
TRACES = ("philly", "alibaba", "recurring", "synthetic")


@dataclass(frozen=True)
class Trace:
    """A job table and the span its windows cover. ``sliding``: every ``weeks``-long window stepping one
    week; otherwise the whole span (at most ``weeks`` long) is one window."""

    name: str
    jobs: pd.DataFrame
    begin: pd.Timestamp
    end: pd.Timestamp
    sliding: bool


@dataclass(frozen=True)
class Window:
    """One replay window of a trace: ``index`` counts windows from the trace's first."""

    trace: str
    index: int
    start: pd.Timestamp
    weeks: float

    @property
    def end(self) -> pd.Timestamp:
        return self.start + pd.Timedelta(weeks=self.weeks)

    @property
    def label(self) -> str:
        return f"w{self.index} {self.start.date()} +{self.weeks:.3g} wk"


def windows(trace: Trace, weeks: float, step: pd.Timedelta = WEEK) -> list[Window]:
    """The windows of ``trace``: sliding ones of ``weeks`` stepping ``step`` inside ``[begin, end]``, or
    the whole span as one (clipped to ``weeks``). A span shorter than ``weeks`` is one window of it all."""
    span = (trace.end - trace.begin) / WEEK
    if not trace.sliding or span <= weeks:
        return [Window(trace.name, 0, trace.begin, min(weeks, span))]
    out: list[Window] = []
    start = trace.begin
    while start + pd.Timedelta(weeks=weeks) <= trace.end:
        out.append(Window(trace.name, len(out), start, weeks))
        start += step
    return out


def _read(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise InputError(f"--data: {path} is missing (the public traces are not bundled with the repository)")
    return pd.read_csv(path)


def philly(data: Path) -> Trace:
    path = data / "philly" / "jobs.csv"
    _read(path)  # the one-line message when absent; load_jobs parses and normalises it
    begin = pd.Timestamp("2017-10-02T00:00Z")
    return Trace("philly", load_jobs(path), begin, begin + 10 * WEEK, sliding=True)


def alibaba(data: Path) -> Trace:
    raw = _read(data / "alibaba" / "jobs.csv")
    gpu = raw[(raw["source"] == "dlrm2025") & (raw["req_gpus"] > 0) & raw["submit_time_s"].notna()].copy()
    trace_end = float(gpu[["submit_time_s", "end_time_s"]].max().max())
    duration = gpu["duration_s"].where(gpu["duration_s"] > 0)
    duration = duration.fillna(trace_end - gpu["submit_time_s"]).clip(lower=60)
    top = gpu["group"].value_counts().index[:10]
    queue = gpu["group"].where(gpu["group"].isin(top), "other").str.replace("_", "-")
    day0 = pd.Timestamp("2026-01-05T00:00Z")
    frame = pd.DataFrame(
        {
            "job_id": gpu["job_id"].astype(str),
            "submit_time": (day0 + pd.to_timedelta(gpu["submit_time_s"], unit="s")),
            "queue": queue,
            "num_gpus": np.ceil(gpu["req_gpus"]).astype(int),
            "duration_s": duration,
            "workload": gpu["group"].astype(str),
        }
    )
    jobs = normalise_jobs(frame, source="alibaba dlrm2025")
    begin = jobs["submit"].min().floor("D") + WEEK
    return Trace("alibaba", jobs, begin, jobs["submit"].max(), sliding=False)


def load(name: str, data: Path) -> Trace:
    """A trace by name (one of ``TRACES``)."""
    if name == "philly":
        return philly(data)
    if name == "alibaba":
        return alibaba(data)
    if name in ("recurring", "synthetic"):
        from bench import replay_recurring

        return replay_recurring.recurring() if name == "recurring" else replay_recurring.synthetic()
    raise InputError(f"--traces: {name!r} is not one of {', '.join(TRACES)}")
