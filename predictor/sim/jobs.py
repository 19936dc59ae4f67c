"""Job tables the simulator replays: a user's file, the bundled Philly sample, or synthetic arrivals.

Every source ends in the same normalised frame (``job_id, submit, queue, num_gpus, duration_s``, submit
in UTC) so the scheduler never sees which trace a job came from. Philly's ``vc`` column and its naive
US/Pacific timestamps are handled here, once, because getting DST wrong shifts a whole week of demand.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from predictor.bounds import MAX_GPUS, check_times
from predictor.errors import InputError
from predictor.sources.files import read_frame
from predictor.userfiles import check_size

__all__ = [
    "JOB_COLUMNS",
    "PHILLY_GPU_SIZES",
    "load_jobs",
    "normalise_jobs",
    "philly_sample",
    "read_table",
    "synthetic_jobs",
]

JOB_COLUMNS = ("job_id", "submit", "queue", "num_gpus", "duration_s")
OPTIONAL_NUMERIC = ("priority", "checkpoint_s", "restart_s", "gpus_used")

# Fitted to Philly's jobs.csv (82,247 jobs): 93 % ask for one GPU; log-durations per size are roughly
# normal with these means/sds (seconds). Kept as constants so the generator needs no data at run time.
PHILLY_GPU_SIZES = np.array([1, 2, 4, 8, 16, 32, 64])
PHILLY_GPU_PROBS = np.array([0.9317, 0.0221, 0.0228, 0.0201, 0.0025, 0.0007, 0.0001])
_LOG_DURATION = {1: (6.72, 1.97), 2: (4.52, 3.0), 4: (9.11, 2.78), 8: (9.65, 2.79)}
_LOG_DURATION_MULTI = (9.27, 3.0)
_PHILLY_QUEUES = ("6214e9", "11cb48", "6c71a0", "b436b2", "103959", "ee9e8c", "0e4a51", "ed69ec")
_PHILLY_QUEUE_PROBS = np.array([0.50, 0.196, 0.121, 0.09, 0.024, 0.018, 0.017, 0.014])
_MAX_DURATION_S = 14 * 86400.0
# The longest job a table may hold: a century, so submit + duration still fits pandas' timestamps.
_MAX_JOB_S = 100 * 365 * 86400.0


def philly_sample() -> pd.DataFrame:
    """The bundled Philly sample (one week of real jobs; CC BY 4.0, Jeon et al., USENIX ATC 2019)."""
    ref = resources.files("predictor.sim").joinpath("data/philly_sample.csv")
    with resources.as_file(ref) as path:
        return normalise_jobs(pd.read_csv(path, dtype=_TEXT_COLUMNS), source="bundled Philly sample")


_TEXT_COLUMNS = {"queue": str, "vc": str, "job_id": str}


def read_table(path: Path) -> pd.DataFrame:
    """``read_frame``, but queue names stay text: Philly's ``6214e9`` would otherwise parse as 6.214e12."""
    if path.suffix.lower() == ".csv" and path.is_file():
        check_size(path, "job table", InputError, "table")
        try:
            return pd.read_csv(path, dtype=_TEXT_COLUMNS)
        except (ValueError, OSError, pd.errors.ParserError, pd.errors.EmptyDataError):
            pass  # read_frame below reports the problem with the project's wording
    return read_frame(path)


def load_jobs(path: Path) -> pd.DataFrame:
    """A job table from CSV/Parquet: ``submit_time``/``submit``, ``queue``/``vc``, ``num_gpus``, ``duration_s``."""
    return normalise_jobs(read_table(path), source=str(path))


def _submit_utc(column: pd.Series, source: str, tz: str) -> pd.Series:
    if pd.api.types.is_numeric_dtype(column):
        raise InputError(f"{source}: submit times are numbers, expected ISO 8601 timestamps")
    try:
        parsed = pd.to_datetime(column, format="ISO8601")
    except (ValueError, TypeError, OverflowError) as exc:
        raise InputError(f"{source}: a submit time is not a timestamp: {exc}".splitlines()[0]) from exc
    if parsed.isna().any():
        raise InputError(f"{source}: submit time is empty at row {int(parsed.isna().to_numpy().argmax()) + 2}")
    if parsed.dt.tz is None:
        # Philly logs local wall-clock time: ambiguous fall-back hours are taken as standard time and the
        # spring-forward gap is shifted forward, so every job keeps a real instant.
        parsed = parsed.dt.tz_localize(tz, ambiguous=False, nonexistent="shift_forward")
    utc = parsed.dt.tz_convert("UTC")
    check_times(utc, f"{source}: submit time")
    return utc.astype("datetime64[ns, UTC]")


def normalise_jobs(raw: pd.DataFrame, *, source: str = "job table", naive_tz: str | None = None) -> pd.DataFrame:
    """Rename, validate and sort a job table into ``JOB_COLUMNS`` (submit as UTC, sorted by submit).

    Naive submit times are US/Pacific when the table has a ``vc`` column (Philly) and UTC otherwise,
    unless ``naive_tz`` says otherwise.
    """
    frame = raw.copy()
    is_philly = "vc" in frame.columns and "queue" not in frame.columns
    renames = {"submit_time": "submit", "vc": "queue"}
    frame = frame.rename(columns={k: v for k, v in renames.items() if k in frame.columns and v not in frame.columns})
    missing = [c for c in ("submit", "queue", "num_gpus", "duration_s") if c not in frame.columns]
    if missing:
        raise InputError(
            f"{source}: missing column(s) {', '.join(missing)} "
            f"(need submit_time, queue or vc, num_gpus, duration_s; have {', '.join(map(str, raw.columns))})"
        )
    if frame.empty:
        raise InputError(f"{source}: the job table has no rows")
    tz = naive_tz or ("US/Pacific" if is_philly else "UTC")
    frame["submit"] = _submit_utc(frame["submit"], source, tz)
    for column, most in (("num_gpus", MAX_GPUS), ("duration_s", _MAX_JOB_S)):
        values = pd.to_numeric(frame[column], errors="coerce")
        # Finite and bounded: 1e308 GPUs would wrap to a negative int64, an infinite duration to NaN quotas.
        bad = values.isna() | ~values.between(0, most, inclusive="right")
        if bad.any():
            row = int(bad.to_numpy().argmax())
            raise InputError(
                f"{source}: column {column!r} must be a number within (0, {most:g}] "
                f"(row {row + 2}: {frame[column].iloc[row]})"
            )
        frame[column] = values
    frame["num_gpus"] = frame["num_gpus"].round().astype("int64")
    frame["duration_s"] = frame["duration_s"].astype("float64")
    frame["queue"] = frame["queue"].astype(str).str.lower()
    if "job_id" not in frame.columns:
        frame["job_id"] = np.arange(len(frame))
    frame["job_id"] = frame["job_id"].astype(str)
    if frame["job_id"].duplicated().any():
        raise InputError(f"{source}: duplicate job_id {frame['job_id'][frame['job_id'].duplicated()].iloc[0]!r}")
    # Optional and kept when given: ``workload`` (a recurring job's template), ``priority`` (priorityClass
    # value), ``checkpoint_s`` (seconds between checkpoints), ``restart_s`` (restart overhead) and
    # ``gpus_used`` (GPUs a job kept busy, where a trace measured it); ``preemptable`` (false: Volcano's
    # reclaim and preempt never evict the job, its pods' ``volcano.sh/preemptable: "false"``).
    for column in OPTIONAL_NUMERIC:
        if column in frame.columns:
            values = pd.to_numeric(frame[column], errors="coerce")
            bad = values.isna() | (values < 0) if column != "priority" else values.isna()
            if bad.any():
                row = int(bad.to_numpy().argmax())
                raise InputError(
                    f"{source}: column {column!r} must be a number"
                    f"{' >= 0' if column != 'priority' else ''} (row {row + 2}: "
                    f"{frame[column].iloc[row]!r})"
                )
            frame[column] = values.astype("int64" if column == "priority" else "float64")
    if "preemptable" in frame.columns:
        frame["preemptable"] = _preemptable(frame["preemptable"], source)
    keep = [*JOB_COLUMNS, *(c for c in ("workload", *OPTIONAL_NUMERIC, "preemptable") if c in frame.columns)]
    out = frame[keep].sort_values(["submit", "job_id"], kind="stable")
    return out.reset_index(drop=True)


_TRUE = frozenset({"true", "1", "yes", "t", "y"})
_FALSE = frozenset({"false", "0", "no", "f", "n"})


def _preemptable(column: pd.Series, source: str) -> pd.Series:
    """The ``preemptable`` column as bools: true/false (any case), yes/no, 1/0; empty means true, as a pod
    without the ``volcano.sh/preemptable`` marker is preemptable."""
    text = column.map(lambda x: "" if pd.isna(x) else str(x).strip().lower())
    text = text.replace({"1.0": "1", "0.0": "0"})
    bad = ~(text.isin(_TRUE) | text.isin(_FALSE) | (text == ""))
    if bad.any():
        row = int(bad.to_numpy().argmax())
        raise InputError(f"{source}: column 'preemptable' must be true or false (row {row + 2}: {column.iloc[row]!r})")
    return ~text.isin(_FALSE)


def synthetic_jobs(
    start: pd.Timestamp,
    end: pd.Timestamp,
    *,
    seed: int = 0,
    jobs_per_hour: float = 60.0,
    daily_amplitude: float = 0.35,
    weekend_factor: float = 0.7,
    trend_per_week: float = 0.0,
    queues: tuple[str, ...] = _PHILLY_QUEUES,
    queue_probs: np.ndarray | None = None,
    workloads_per_queue: int = 0,
    workload_skew: float = 1.1,
) -> pd.DataFrame:
    """Jobs from a non-homogeneous Poisson process with a daily and weekly cycle and a linear trend.

    GPU counts and log-normal durations follow Philly's fitted distributions, so a synthetic run stresses
    the scheduler like the real trace (mostly 1-GPU jobs, a heavy tail of long multi-node gangs).

    ``workloads_per_queue`` > 0 makes jobs recur, as retraining and sweeps do on real clusters: each queue
    gets that many workload templates (GPU count and typical duration fixed per template), every job is a
    run of one drawn with Zipf weights ``1 / rank ** workload_skew``, and the job id is
    ``<queue>-w<k>-<n>`` so its Volcano job name has a stable stem and a run number. 0 (the default)
    keeps every job its own workload and the output unchanged.
    """
    if end <= start:
        raise InputError(f"synthetic jobs: end {end.isoformat()} is not after start {start.isoformat()}")
    if jobs_per_hour <= 0:
        raise InputError(f"synthetic jobs: jobs_per_hour must be > 0, got {jobs_per_hour}")
    rng = np.random.default_rng(seed)
    hours = pd.date_range(start.floor("h"), end, freq="h", inclusive="left", tz="UTC")
    hour_of_day = hours.hour.to_numpy()
    weekday = hours.day_of_week.to_numpy()
    weeks = (hours - hours[0]).total_seconds().to_numpy() / (7 * 86400)
    # Peak in the (Pacific) afternoon: 22 UTC ≈ 14 PT, as in Philly's submissions.
    rate = jobs_per_hour * (1 + daily_amplitude * np.cos(2 * np.pi * (hour_of_day - 22) / 24))
    rate *= np.where(weekday >= 5, weekend_factor, 1.0) * np.clip(1 + trend_per_week * weeks, 0.05, None)
    counts = rng.poisson(rate)
    base = hours.as_unit("s").asi8[np.repeat(np.arange(len(hours)), counts)]
    submit_s = base + rng.uniform(0, 3600, size=len(base)).astype("int64")
    n = len(submit_s)
    gpus = rng.choice(PHILLY_GPU_SIZES, size=n, p=PHILLY_GPU_PROBS / PHILLY_GPU_PROBS.sum())
    mu = np.array([_LOG_DURATION.get(int(g), _LOG_DURATION_MULTI)[0] for g in PHILLY_GPU_SIZES])
    sd = np.array([_LOG_DURATION.get(int(g), _LOG_DURATION_MULTI)[1] for g in PHILLY_GPU_SIZES])
    size_idx = np.searchsorted(PHILLY_GPU_SIZES, gpus)
    duration = np.clip(np.exp(rng.normal(mu[size_idx], sd[size_idx])), 10.0, _MAX_DURATION_S)
    probs = _PHILLY_QUEUE_PROBS if queue_probs is None else np.asarray(queue_probs, dtype=float)
    if len(probs) != len(queues):
        raise InputError("synthetic jobs: queue_probs must have one weight per queue")
    queue = rng.choice(np.array(queues), size=n, p=probs / probs.sum())
    frame = pd.DataFrame(
        {
            "job_id": [f"s{i}" for i in range(n)],
            "submit": pd.to_datetime(np.sort(submit_s), unit="s", utc=True),
            "queue": queue,
            "num_gpus": gpus.astype("int64"),
            "duration_s": duration.round(),
        }
    )
    if workloads_per_queue > 0:
        frame = _recurring(frame, workloads_per_queue, workload_skew, seed)
    frame = frame[frame["submit"] < end]
    return normalise_jobs(frame, source="synthetic jobs")


def _recurring(frame: pd.DataFrame, per_queue: int, skew: float, seed: int) -> pd.DataFrame:
    """Turn independent jobs into runs of per-queue workload templates (a separate stream: the arrival
    draws above stay as they were)."""
    if skew < 0:
        raise InputError(f"synthetic jobs: workload_skew must be >= 0, got {skew}")
    rng = np.random.default_rng([seed, 0x4EC])
    weights = 1.0 / np.arange(1, per_queue + 1) ** skew
    weights /= weights.sum()
    size_idx = rng.choice(
        len(PHILLY_GPU_SIZES), size=(len(_PHILLY_QUEUES) + 64, per_queue), p=PHILLY_GPU_PROBS / PHILLY_GPU_PROBS.sum()
    )
    n = len(frame)
    k = rng.choice(per_queue, size=n, p=weights)
    queue_codes = pd.factorize(frame["queue"])[0] % size_idx.shape[0]
    g = PHILLY_GPU_SIZES[size_idx[queue_codes, k]]
    mu = np.array([_LOG_DURATION.get(int(x), _LOG_DURATION_MULTI)[0] for x in g])
    # A template's runs last about as long as each other: its own median, a narrow spread.
    template_mu = mu + ((queue_codes * 7919 + k * 104729) % 1000 / 1000 - 0.5) * 2.0
    durations = np.clip(np.exp(rng.normal(template_mu, 0.3)), 60.0, _MAX_DURATION_S)
    names = [f"{q}-w{int(i):02d}" for q, i in zip(frame["queue"].to_numpy(), k, strict=True)]
    frame = frame.copy()
    frame["workload"] = names
    frame["num_gpus"] = g.astype(np.int64)
    frame["duration_s"] = np.round(durations)
    frame["job_id"] = [f"{w}-{i}" for i, w in enumerate(names)]
    return frame
