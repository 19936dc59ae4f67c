"""The runs of ``bench.replay``: one replay per (trace, window, seed, row), cached on disk, run in parallel.

Rows are the replay's policies (``predictor.replay.POLICIES``, read at run time so a new policy shows up
here unchanged); where ``ReplaySettings`` takes a ``forecaster``, ``loop`` is run once per forecaster
(``loop/naive``, ``loop/auto``, ``loop/oracle``; ``loop/auto`` is the default loop); and a ``quota-free``
reference row: every job in one queue owning the cluster (no quotas, no reclaim), same gangs, nodes and
scheduler.

A cached run is keyed by everything it depends on: the trace's jobs in the window and its warm-up week, the
window, cluster, seed, row and planner settings, and a digest of the replay, simulator, planner,
right-sizing and forecasting sources, so a change to any of them runs it again instead of serving a number
another code state produced.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import pandas as pd

from bench.forecast_cache import code_digest
from bench.replay_traces import WEEK, Window
from predictor import replay as replay_pkg
from predictor.planner import PlannerSettings
from predictor.replay import ReplaySettings, replay

__all__ = [
    "QUOTA_FREE",
    "SOURCES",
    "Result",
    "Row",
    "Run",
    "cache_key",
    "has_forecaster",
    "jobs_digest",
    "replays_as",
    "rows",
    "run_all",
    "run_key",
    "source_digest",
]

QUOTA_FREE = "quota-free"
FORECASTERS = ("naive", "auto", "oracle")
# The code a replay's numbers come from (paths from the repository root).
SOURCES = (
    "predictor/replay",
    "predictor/sim",
    "predictor/planner",
    "predictor/rightsize",
    "predictor/registry",
    "models/forecast",
)


@dataclass(frozen=True)
class Row:
    """One line of a trace's table: a policy, the loop's forecaster (``None``: the replay's default), or
    all jobs in one queue (the quota-free reference)."""

    name: str
    policy: str
    forecaster: str | None = None
    one_queue: bool = False


@dataclass(frozen=True)
class Run:
    """One replay to do; ``nodes`` comes from the window's sizing."""

    window: Window
    seed: int
    row: Row
    nodes: int
    fluid_bound: float


@dataclass(frozen=True)
class Result:
    """A finished run: the replay's summary and what the policy did (``changed``: requests right-sizing
    changed; ``jobs``: jobs submitted in the window)."""

    trace: str
    window: int
    start: str
    weeks: float
    seed: int
    row: str
    nodes: int
    fluid_bound: float
    summary: dict[str, float]
    changed: int
    jobs: int
    quota_changes: int
    seconds: float
    cached: bool = False


def has_forecaster() -> bool:
    """Whether this replay lets the loop's forecaster be chosen (``ReplaySettings.forecaster``)."""
    return "forecaster" in getattr(ReplaySettings, "__dataclass_fields__", {}) or hasattr(ReplaySettings, "forecaster")


def rows(policies: Sequence[str] | None = None, *, forecaster: bool | None = None) -> list[Row]:
    """The rows: every policy (``loop`` split by forecaster when the replay allows it), then quota-free."""
    policies = tuple(getattr(replay_pkg, "POLICIES", ())) if policies is None else tuple(policies)
    split = has_forecaster() if forecaster is None else forecaster
    out: list[Row] = []
    for policy in policies:
        if policy == "oracle" and split:
            continue  # the oracle policy is the loop planning from the oracle forecaster: the loop/oracle row
        if policy == "loop" and split:
            out += [Row(f"loop/{f}", "loop", forecaster=f) for f in FORECASTERS]
        else:
            out.append(Row(policy, policy))
    return [*out, Row(QUOTA_FREE, "static-elastic", one_queue=True)]


def source_digest(repo: Path, sources: tuple[str, ...] = SOURCES) -> str:
    """Digest of the sources a replay's numbers come from (paths and contents)."""
    return code_digest(repo, sources)


def window_jobs(jobs: pd.DataFrame, window: Window) -> pd.DataFrame:
    """The jobs a replay of ``window`` schedules: its warm-up week and the window itself."""
    inside = (jobs["submit"] >= window.start - WEEK) & (jobs["submit"] < window.end)
    return jobs[inside].reset_index(drop=True)


def jobs_digest(jobs: pd.DataFrame) -> str:
    """Digest of a job table's values (column names included), independent of its index."""
    h = hashlib.sha256(",".join(map(str, jobs.columns)).encode())
    h.update(pd.util.hash_pandas_object(jobs, index=False).to_numpy().tobytes())
    return h.hexdigest()[:16]


def replays_as(row: Row, jobs: pd.DataFrame) -> Row:
    """The row whose replay ``row``'s is: ``rightsize+loop`` on jobs without a ``workload`` column is ``loop``
    (nothing recurs, so right-sizing changes no request), which saves Philly a replay per window and seed."""
    if row.policy == "rightsize+loop" and "workload" not in jobs.columns:
        return replace(row, policy="loop")
    return row


def run_key(run: Run, jobs: str, planner: PlannerSettings, source: str) -> str:
    """The cache key of ``run``: its inputs (the row's replay, not its name), the digest of its jobs and the
    digest of the code."""
    inputs = {
        "trace": run.window.trace,
        "start": run.window.start.isoformat(),
        "weeks": run.window.weeks,
        "seed": run.seed,
        "row": {k: v for k, v in asdict(run.row).items() if k != "name"},
        "nodes": run.nodes,
        "planner": planner.model_dump(mode="json"),
        "jobs": jobs,
        "source": source,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:24]


def cache_key(run: Run, jobs: pd.DataFrame, planner: PlannerSettings, source: str) -> str:
    """The key ``run_all`` files ``run`` under: that of the replay it is (``replays_as``) on ``jobs``."""
    return run_key(replace(run, row=replays_as(run.row, jobs)), jobs_digest(jobs), planner, source)


def _settings(run: Run, planner: PlannerSettings) -> ReplaySettings:
    extra: dict[str, Any] = {}
    if run.row.forecaster is not None:
        extra["forecaster"] = run.row.forecaster
    return ReplaySettings(
        nodes=run.nodes,
        start=run.window.start,
        weeks=run.window.weeks,
        policy=run.row.policy,
        seed=run.seed,
        planner=planner,
        **extra,
    )


def replay_one(run: Run, jobs: pd.DataFrame, planner: PlannerSettings) -> Result:
    """Replay one run (in a worker process when ``--jobs`` > 1)."""
    table = jobs.assign(queue="all") if run.row.one_queue else jobs
    t0 = time.perf_counter()
    r = replay(table, _settings(run, planner))
    w = run.window
    return Result(
        trace=w.trace,
        window=w.index,
        start=w.start.isoformat(),
        weeks=w.weeks,
        seed=run.seed,
        row=run.row.name,
        nodes=run.nodes,
        fluid_bound=run.fluid_bound,
        summary={k: float(v) for k, v in r.summary.items()},
        changed=r.rightsized_jobs,
        jobs=int((jobs["submit"] >= w.start).sum()),
        quota_changes=r.quota_changes,
        seconds=time.perf_counter() - t0,
    )


class Cache:
    """One JSON file per run under ``root`` (``None``: no cache), named by ``run_key``."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        if root is not None:
            root.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> Result | None:
        if self.root is None or not (self.root / f"{key}.json").is_file():
            return None
        try:
            data = json.loads((self.root / f"{key}.json").read_text())
            return Result(**{**data, "cached": True})
        except (ValueError, TypeError):  # a truncated or foreign file: run again and overwrite it
            return None

    def put(self, key: str, result: Result) -> None:
        if self.root is None:
            return
        tmp = self.root / f"{key}.json.tmp"
        tmp.write_text(json.dumps({f.name: getattr(result, f.name) for f in fields(result) if f.name != "cached"}))
        tmp.replace(self.root / f"{key}.json")


def _progress(done: int, total: int, result: Result) -> None:
    how = "cached" if result.cached else f"{result.seconds:,.0f} s"
    print(
        f"[{done}/{total}] {result.trace} w{result.window} seed {result.seed} {result.row}: {how}",
        file=sys.stderr,
        flush=True,
    )


def run_all(
    runs: Iterable[Run],
    jobs: Callable[[Window], pd.DataFrame],
    planner: PlannerSettings,
    cache: Cache,
    source: str,
    *,
    workers: int = 1,
    progress: Callable[[int, int, Result], None] = _progress,
) -> list[Result]:
    """Every run, from the cache where its key is there, else replayed (``workers`` processes) and cached;
    a progress line per finished run. Results in the order of ``runs``."""
    todo = list(runs)
    results: dict[int, Result] = {}
    # Runs with one key are one replay (``replays_as``): replayed once, reported under each row's name.
    pending: dict[str, tuple[Run, pd.DataFrame, list[int]]] = {}
    for i, run in enumerate(todo):
        table = jobs(run.window)
        same = replace(run, row=replays_as(run.row, table))
        key = cache_key(run, table, planner, source)
        hit = cache.get(key)
        if hit is not None:
            results[i] = replace(hit, row=run.row.name)
            progress(len(results), len(todo), results[i])
        else:
            pending.setdefault(key, (same, table, []))[2].append(i)

    def done(key: str, result: Result) -> None:
        cache.put(key, result)
        for i in pending[key][2]:
            results[i] = replace(result, row=todo[i].row.name)
            progress(len(results), len(todo), results[i])

    if workers <= 1:
        for key, (same, table, _) in pending.items():
            done(key, replay_one(same, table, planner))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures: dict[Future[Result], str] = {
                pool.submit(replay_one, same, table, planner): key for key, (same, table, _) in pending.items()
            }
            for future in as_completed(futures):
                done(futures[future], future.result())
    return [results[i] for i in range(len(todo))]
