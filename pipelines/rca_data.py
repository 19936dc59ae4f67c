"""Labelled symptom windows for the root-cause tree: from simulator runs, or from a team's own incidents.

The simulator's faults table is the ground truth (cause, start, end, node/GPU/job/queue). Each window
``(at - w, at]`` of each candidate (node or queue) is labelled with a fault's cause when the fault covers
at least half of it, ``healthy`` when no fault touches it or the preceding window, and dropped when it is
ambiguous (a fault starting or ending at the edge, or a node of a hung job that only *waits* on the GPU
with the XID). Strength is kept per row so evaluation can hold weak faults out of training.

Team incidents CSV (``INCIDENTS_FORMAT``): one row per labelled incident, columns ``time`` (ISO 8601, the
window end), ``scope`` (``node=NAME``, ``queue=NAME`` or ``cluster`` for every candidate) and ``cause``
(one of ``CLASSES``, ``healthy`` allowed); an optional ``window`` column (``15m``) overrides the default.

Training data, not runtime: this is the only root-cause code that runs the simulator, so it lives with the
training jobs and runtime diagnosis (``predictor.diagnose``) imports no simulator code.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from models.frames import ID, TIME, VALUE
from models.rca import CLASSES, HEALTHY
from models.rca_features import (
    WindowData,
    mark_not_applicable,
    queue_not_applicable,
    window_features,
    with_derived,
)
from pipelines.fanout import current_executor
from pipelines.rca_perturb import perturb
from predictor import sim
from predictor.diagnose.engine import NEEDED_METRICS
from predictor.errors import InputError
from predictor.sources.files import read_frame
from predictor.sources.promql import series_id
from predictor.timeparse import parse_duration, parse_time

__all__ = [
    "HELDOUT_SCENARIOS",
    "INCIDENTS_FORMAT",
    "MIN_TRAIN_STRENGTH",
    "TRAIN_SCENARIOS",
    "Scenario",
    "build_dataset",
    "incident_windows",
    "label_windows",
    "read_incidents",
    "scenario_windows",
    "simulate_scenario",
    "to_long_frame",
    "to_window_data",
]

INCIDENTS_FORMAT = "time,scope,cause[,window]  e.g. 2026-03-02T10:15:00Z,node=gpu-node-17,gpu_thermal,15m"
_SINGLE_GPU = ("gpu_thermal", "gpu_power_cap")
_START = pd.Timestamp("2026-03-02", tz="UTC")
WINDOW = pd.Timedelta(minutes=15)
# A fault spanning at least this share of a window labels it: an operator asking about a window expects a
# fault that held for a quarter of it to be named. Fainter ones are dropped (neither fault nor healthy).
MIN_LABEL_COVER = 0.25


@dataclass(frozen=True)
class Scenario:
    """One simulator run and what varies in it (see ``pipelines.rca_configs`` for the catalogue).

    ``queues`` > 0 replaces the eight Philly queues with that many (Zipf-weighted); ``capability`` is each
    queue's hard cap as a share of the cluster (1: borrow anything); ``hot_gpus`` a share of GPUs that run
    8-16 °C hotter while healthy; ``noisy_nodes`` a share of nodes with a CPU-hungry neighbour now and then
    (no GPU effect); ``drop`` metric families absent from the history, as on a cluster that does not scrape
    them; ``family`` the configuration family the scenario belongs to (held out together);
    ``fault_onsets`` lets faults ramp up or come in bursts at partial amplitude (``predictor.sim.onsets``).
    """

    seed: int
    nodes: int = 8
    fault_rate_per_day: float = 30.0
    days: float = 1.0
    step_s: int = 60
    jobs_per_hour: float = 25.0
    queues: int = 0
    capability: float = 1.0
    hot_gpus: float = 0.0
    noisy_nodes: float = 0.0
    drop: tuple[str, ...] = ()
    family: str = ""
    fault_onsets: bool = False

    @property
    def name(self) -> str:
        base = f"seed{self.seed}-n{self.nodes}-r{self.fault_rate_per_day:g}"
        extra = [
            f"q{self.queues}" if self.queues else "",
            f"c{self.capability:g}" if self.capability < 1 else "",
            f"h{self.hot_gpus:g}" if self.hot_gpus else "",
            f"z{self.noisy_nodes:g}" if self.noisy_nodes else "",
            f"j{self.jobs_per_hour:g}" if self.jobs_per_hour != 25.0 else "",
            f"x{zlib.crc32(','.join(self.drop).encode()):08x}" if self.drop else "",
            "o" if self.fault_onsets else "",
        ]
        return "-".join([base, *[e for e in extra if e]])


def simulate_scenario(s: Scenario) -> sim.SimResult:
    start = _START + pd.Timedelta(days=7 * (s.seed % 5))
    names = tuple(f"q{i:02d}" for i in range(s.queues)) if s.queues else None
    extra = {"queues": names, "queue_probs": 1 / np.arange(1, s.queues + 1)} if names else {}
    jobs = sim.synthetic_jobs(
        start - pd.Timedelta(days=1),
        start + pd.Timedelta(days=s.days + 0.1),
        seed=s.seed,
        jobs_per_hour=s.jobs_per_hour * s.nodes / 8,
        **extra,  # type: ignore[arg-type]
    )
    settings = sim.SimSettings(
        start=start,
        weeks=s.days / 7,
        step_s=s.step_s,
        seed=s.seed,
        fault_rate_per_day=s.fault_rate_per_day,
        warmup_days=1,
        fault_onsets=s.fault_onsets,
    )
    cluster = sim.ClusterSpec.uniform(s.nodes)
    queues = None
    if s.capability < 1:
        total = cluster.n_gpus
        cap = max(8.0, round(s.capability * total))
        queues = [sim.QueueSpec(q.name, q.weight, min(q.deserved, cap), cap) for q in sim.default_queues(jobs, total)]
    return sim.simulate(jobs, cluster, settings, queues=queues)


def to_long_frame(result: sim.SimResult, names: Iterable[str] = NEEDED_METRICS) -> pd.DataFrame:
    """The run's metric families as one long history frame (what Prometheus would answer)."""
    wanted = set(names)
    times = result.grid.times_s().astype(np.int64) * 1_000_000_000
    parts: list[pd.DataFrame] = []
    for family in result.families("all"):
        if family.name not in wanted:
            continue
        for labels, steps, values in family.series():
            keep = np.isfinite(values)
            if not keep.any():
                continue
            full = {"__name__": family.name, **labels}
            parts.append(pd.DataFrame({ID: series_id(full), TIME: times[steps[keep]], VALUE: values[keep], **full}))
    frame = pd.concat(parts, ignore_index=True)
    frame[TIME] = pd.to_datetime(frame[TIME], utc=True)
    return frame


def to_window_data(result: sim.SimResult, names: Iterable[str] = NEEDED_METRICS) -> WindowData:
    """The run's families straight into ``WindowData`` (same content as ``WindowData(to_long_frame(...))``,
    without building millions of label cells)."""
    wanted = set(names)
    times = result.grid.times_s().astype(np.int64) * 1_000_000_000
    tables: dict[str, tuple[np.ndarray, pd.DataFrame]] = {}
    for family in result.families("all"):
        if family.name not in wanted:
            continue
        # A family may yield one label set in several pieces (a counter's segments): one column each.
        columns: dict[tuple[tuple[str, str], ...], np.ndarray] = {}
        for lab, steps, values in family.series():
            key = tuple(sorted(lab.items()))
            col = columns.setdefault(key, np.full(len(times), np.nan))
            keep = np.isfinite(values)
            col[steps[keep]] = values[keep]
        kept = {k: c for k, c in columns.items() if np.isfinite(c).any()}
        if kept:
            labels = pd.DataFrame([dict(k) for k in kept]).fillna("")
            tables[family.name] = (np.column_stack(list(kept.values())), labels)
    return WindowData.from_matrices(times, tables)


def _affected(fault: pd.Series) -> tuple[set[str], set[str]]:
    """(nodes labelled with the cause, nodes to drop as ambiguous)."""
    cause = str(fault["cause"])
    job_nodes = {n for n in str(fault["nodes"]).split(",") if n}
    node = str(fault["node"])
    if cause in _SINGLE_GPU:
        return {node}, set()
    if cause in ("gpu_hardware", "nic_link_flap"):  # the gang waits on the broken node: its peers only stall
        return {node}, job_nodes - {node}
    if cause == "node_not_ready":
        return {node}, set()
    return job_nodes or {node}, set()


def label_windows(features: pd.DataFrame, faults: pd.DataFrame, at: pd.Timestamp, window: pd.Timedelta) -> pd.DataFrame:
    """``features`` of one window with ``label`` and ``strength`` columns; ambiguous rows removed."""
    w0, p0 = at - window, at - 2 * window
    label = np.full(len(features), HEALTHY, dtype=object)
    best = np.zeros(len(features))
    strength = np.full(len(features), np.nan)
    drop = np.zeros(len(features), dtype=bool)
    nodes = features["node"].to_numpy()
    queues = features["queue"].to_numpy()
    for f in faults.to_dict("records"):
        start, end = pd.Timestamp(f["start"]), pd.Timestamp(f["end"])
        if end <= p0 or start >= at:
            continue
        frac = (min(end, at) - max(start, w0)) / window
        if f["cause"] == "scheduling_starvation":
            hit, ambiguous = queues == f["queue"], np.zeros(len(features), dtype=bool)
        else:
            lab, amb = _affected(pd.Series(f))
            hit, ambiguous = np.isin(nodes, list(lab)), np.isin(nodes, list(amb))
        drop |= ambiguous
        if frac >= MIN_LABEL_COVER:
            better = hit & (frac > best)
            label[better], best[better], strength[better] = f["cause"], frac, f["strength"]
        else:
            drop |= hit
    out = features.assign(label=label, strength=strength)
    keep = ~drop | (best >= MIN_LABEL_COVER)
    return out[keep & ~(drop & (best < MIN_LABEL_COVER))].reset_index(drop=True)


def scenario_windows(s: Scenario, window: pd.Timedelta = WINDOW, every: pd.Timedelta | None = None) -> pd.DataFrame:
    """Every labelled candidate window of one simulated scenario."""
    result = simulate_scenario(s)
    data = perturb(to_window_data(result), s)
    every = every or window
    first = pd.Timestamp(result.grid.start_s, unit="s", tz="UTC")
    last = pd.Timestamp(result.grid.end_s, unit="s", tz="UTC")
    grid = pd.date_range(first + 2 * window, last, freq=every)
    rows = []
    for at in grid:
        feats = window_features(data, at, window)
        rows.append(label_windows(feats, result.faults, at, window).assign(at=at))
    out = pd.concat(rows, ignore_index=True)
    return out.assign(
        scenario=s.name,
        seed=s.seed,
        nodes=s.nodes,
        fault_rate=s.fault_rate_per_day,
        family=s.family or "default",
        missing=",".join(s.drop),
    )


def read_incidents(path: Path) -> pd.DataFrame:
    """A team's labelled incidents (``INCIDENTS_FORMAT``), validated with errors naming the file and row."""
    frame = read_frame(path)
    missing = [c for c in ("time", "scope", "cause") if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)} (format: {INCIDENTS_FORMAT})")
    # Per row, so the line names the row and the value to correct; parse_time also refuses an instant past
    # what nanosecond timestamps hold, which the window arithmetic below would overflow on.
    times = [
        parse_time("" if pd.isna(text) else str(text), name=f"{path}: row {i + 2}: time")
        for i, text in enumerate(frame["time"])
    ]
    frame["time"] = pd.to_datetime(pd.Series(times, index=frame.index, dtype=object), utc=True)
    bad = ~frame["cause"].isin(CLASSES)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(
            f"{path}: row {row + 2}: unknown cause {frame['cause'].iloc[row]!r} (known: {', '.join(CLASSES)})"
        )
    for i, scope in enumerate(frame["scope"].astype(str)):
        if scope != "cluster" and not (scope.startswith(("node=", "queue=")) and len(scope.split("=", 1)[1]) > 0):
            raise InputError(f"{path}: row {i + 2}: scope {scope!r} is not node=NAME, queue=NAME or cluster")
    for i, text in enumerate(frame["window"] if "window" in frame.columns else []):
        if isinstance(text, str) and text:  # checked here, not when the window is read, to name file and row
            parse_duration(text, name=f"{path}: row {i + 2}: window")
    return frame


def incident_windows(history: pd.DataFrame, incidents: pd.DataFrame, window: pd.Timedelta = WINDOW) -> pd.DataFrame:
    """Labelled feature rows from a team's history frame and incidents table (only the named scopes)."""
    data = WindowData(history)
    rows = []
    for inc in incidents.to_dict("records"):
        text = inc.get("window")
        w = parse_duration(text, name="incident window") if isinstance(text, str) and text else window
        feats = window_features(data, pd.Timestamp(inc["time"]), w)
        scope = str(inc["scope"])
        if scope.startswith("node="):
            feats = feats[feats["node"] == scope.split("=", 1)[1]]
        elif scope.startswith("queue="):
            feats = feats[feats["queue"] == scope.split("=", 1)[1]]
        rows.append(feats.assign(label=str(inc["cause"]), strength=np.nan, at=pd.Timestamp(inc["time"])))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


# Held out by seed, cluster size and fault rate; faults weaker than MIN_TRAIN_STRENGTH are also held out
# of training (the simulator draws each fault's strength in [0.3, 1.0]), so evaluation sees unseen
# intensities too.
TRAIN_SCENARIOS = tuple(
    Scenario(seed=s, nodes=n, fault_rate_per_day=r, fault_onsets=True)
    for s, n, r in ((1, 6, 40), (2, 10, 40), (3, 8, 30), (4, 6, 60), (5, 10, 30), (6, 12, 40))
)
HELDOUT_SCENARIOS = tuple(
    Scenario(seed=s, nodes=n, fault_rate_per_day=r, fault_onsets=True)
    for s, n, r in ((101, 16, 50), (102, 5, 80), (103, 9, 25))
)
MIN_TRAIN_STRENGTH = 0.4


def build_dataset(
    scenarios: Iterable[Scenario], window: pd.Timedelta = WINDOW, cache_dir: Path | None = None
) -> pd.DataFrame:
    """Labelled windows of many scenarios; each scenario's rows cached as Parquet under ``cache_dir``."""
    scenarios = list(scenarios)
    paths = [
        None
        if cache_dir is None
        else cache_dir / f"{s.name}-d{s.days:g}-s{s.step_s}-w{int(window.total_seconds())}.parquet"
        for s in scenarios
    ]
    missing = [i for i, path in enumerate(paths) if path is None or not path.is_file()]
    # the simulations are the slow part: they run on the command's executor (serial unless retrain --ray/--processes)
    made = dict(
        zip(missing, current_executor().map(_windows_of, [(scenarios[i], window) for i in missing]), strict=True)
    )
    parts = []
    for i, path in enumerate(paths):
        rows = made[i] if i in made or path is None else pd.read_parquet(path)
        if i in made and path is not None:
            from predictor.atomicio import atomic_path

            with atomic_path(path) as tmp:
                rows.to_parquet(tmp)
        parts.append(rows)
    rows = mark_not_applicable(pd.concat(parts, ignore_index=True))
    # Cached windows may predate these two steps; both are idempotent, so fresh windows are unchanged.
    dropped = rows["missing"].fillna("").astype(str) if "missing" in rows.columns else pd.Series("", index=rows.index)
    families_missing: list[set[str]] = [set(m.split(",")) - {""} for m in dropped]
    return with_derived(queue_not_applicable(rows, families_missing))


def _windows_of(task: tuple[Scenario, pd.Timedelta]) -> pd.DataFrame:
    """One scenario's windows (a top-level function: an executor's worker imports it by name)."""
    return scenario_windows(*task)
