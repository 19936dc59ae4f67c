"""What a scheduler run leaves behind: one record per attempt (a gang's run from start to its end or
eviction), and the per-pass queue timeline, as the frames every later stage (occupancy, metrics, replay
measures) reads."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = ["AttemptLog", "SchedulerResult"]


@dataclass
class SchedulerResult:
    """What happened: one row per attempt (``attempts``) and per-pass queue state (``timeline``)."""

    attempts: pd.DataFrame
    attempt_gpus: list[np.ndarray]
    timeline_s: np.ndarray  # pass times (epoch seconds)
    allocated: np.ndarray  # [passes, queues] GPUs
    pending_gpus: np.ndarray
    pending_jobs: np.ndarray
    running_jobs: np.ndarray
    ready_gpus: np.ndarray  # [passes]
    quota_s: np.ndarray  # quota change times
    deserved: np.ndarray  # [changes, queues]
    capability: np.ndarray
    queue_names: list[str]
    dropped_jobs: int


@dataclass
class AttemptLog:
    """Per attempt, in start order: its job, times, GPUs, and (once it ends) why and what work it kept."""

    job: list[int] = field(default_factory=list)
    start: list[int] = field(default_factory=list)
    end: list[int] = field(default_factory=list)
    killed: list[bool] = field(default_factory=list)
    gpus: list[np.ndarray] = field(default_factory=list)
    active: list[bool] = field(default_factory=list)
    overhead: list[float] = field(default_factory=list)  # restart overhead of this attempt, s
    kept: list[float] = field(default_factory=list)  # work kept, s (NaN while running)
    lost: list[float] = field(default_factory=list)  # work since the last checkpoint, lost, s
    cause: list[str] = field(default_factory=list)  # done, running, node, reclaim, preempt

    def frame(
        self, jobs: pd.DataFrame, gpus: np.ndarray, submit: np.ndarray, node_names: list[str], per_node: int
    ) -> pd.DataFrame:
        """The attempts table (one row per attempt; ``job_index`` is the row of the scheduler's jobs)."""
        job = np.array(self.job, dtype=np.int64)
        attempt_no = np.zeros(len(job), dtype=np.int64)
        seen: dict[int, int] = {}
        for i, j in enumerate(job.tolist()):
            attempt_no[i] = seen.get(j, 0)
            seen[j] = attempt_no[i] + 1
        start = np.array(self.start, dtype=np.int64)
        return pd.DataFrame(
            {
                "job_id": jobs["job_id"].to_numpy()[job] if len(job) else np.array([], dtype=object),
                "queue": jobs["queue"].to_numpy()[job] if len(job) else np.array([], dtype=object),
                "num_gpus": gpus[job],
                "submit": pd.to_datetime(submit[job], unit="s", utc=True),
                "start": pd.to_datetime(start, unit="s", utc=True),
                "end": pd.to_datetime(np.array(self.end, dtype=np.int64), unit="s", utc=True),
                "wait_s": (start - submit[job]).astype(float),
                "attempt": attempt_no,
                "killed": np.array(self.killed, dtype=bool),
                "cause": np.array(self.cause, dtype=object),
                "overhead_s": np.array(self.overhead, dtype=float),
                "kept_s": np.array(self.kept, dtype=float),
                "lost_s": np.array(self.lost, dtype=float),
                "nodes": [",".join(node_names[n] for n in np.unique(gp // per_node)) for gp in self.gpus],
                "gpus": [" ".join(map(str, gp.tolist())) for gp in self.gpus],
                "job_index": job,
            }
        )
