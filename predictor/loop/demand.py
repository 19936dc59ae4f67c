"""The loop's demand seam: per queue, the GPUs its jobs will need over the horizon, from the served model.

``DemandReader`` is injected into ``Loop`` like the forecaster (a Protocol, not a subclass). Production wires
``RegistryDemand``: the ``gpu-demand`` champion as registered (its state is loaded, nothing is refitted)
applied to each queue's hourly demand history (the loop's own history frame) and the GPUs pending in it
(``QUEUE_PENDING`` through any ``MetricSource``). ``predictor demand`` writes the same prediction to the
file ``predictor plan --demand`` reads.

Missing data is *unknown*, never zero: a queue without a fresh pending-jobs series, with less than a week
of hourly history, or a champion that cannot predict queues gets no demand row, and ``unknown`` says why;
the planner then sizes it by the forecast alone and says so in the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd

from models.frames import ID, TIME, VALUE
from predictor.errors import RegistryError
from predictor.loop.champion import ChampionCache
from predictor.registry import DEMAND_FAMILY
from predictor.sources.queries import QUEUE_PENDING

if TYPE_CHECKING:
    from predictor.loop.metrics import LoopMetrics
    from predictor.loop.seams import ChampionRegistry
    from predictor.sources import MetricSource

__all__ = [
    "DemandPrediction",
    "DemandReader",
    "EstimatorDemand",
    "FileJobs",
    "FrameJobs",
    "JobsReader",
    "RegistryDemand",
    "SourceJobs",
    "model_uri",
]

COLUMNS = ("queue", "resource", "peak", "now", "quantile", "horizon_h", "model", "timestamp")


def model_uri(family: str, version: str) -> str:
    """``models:/<family>/<version>`` for a registered version; anything else (``local``, a URI) as given."""
    return f"models:/{family}/{version}" if version.isdigit() else version


@dataclass
class DemandPrediction:
    """Demand rows (``predictor.planner.demand_rule.DEMAND_COLUMNS``), why other queues have none, and
    ``{family: version}`` of the model served (as the forecaster reports its own)."""

    frame: pd.DataFrame
    unknown: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)


class DemandReader(Protocol):
    def demand(self, history: pd.DataFrame, now: pd.Timestamp) -> DemandPrediction:
        """Demand per queue of ``history`` (``series_id`` = queue) at ``now``; every other queue in ``unknown``."""
        ...


class JobsReader(Protocol):
    def pending(self, now: pd.Timestamp) -> pd.DataFrame:
        """Hourly GPUs pending per queue (``series_id`` = queue, ``timestamp``, ``value``) up to ``now``."""
        ...


class SourceJobs:
    """Pending GPUs per queue from any ``MetricSource`` through the catalogue's ``QUEUE_PENDING``."""

    def __init__(
        self,
        source: MetricSource,
        *,
        query: str = QUEUE_PENDING,
        lookback_h: float = 24,
        step_s: float = 3600,
        queue_label: str = "queue_name",
    ) -> None:
        self.source, self.query, self.queue_label = source, query, queue_label
        self.lookback, self.step = pd.Timedelta(hours=lookback_h), pd.Timedelta(seconds=step_s)

    def pending(self, now: pd.Timestamp) -> pd.DataFrame:
        frame: pd.DataFrame = self.source.query_range(self.query, now - self.lookback, now, self.step)
        if self.queue_label in frame.columns:
            frame = frame.assign(**{ID: frame[self.queue_label].astype(str)})
        if frame.empty:
            return pd.DataFrame(
                {ID: pd.Series(dtype=str), TIME: pd.Series(dtype="datetime64[ns, UTC]"), VALUE: pd.Series(dtype=float)}
            )
        return frame[[ID, TIME, VALUE]].reset_index(drop=True)


class FileJobs:
    """Pending GPUs per queue from a long file (``series_id`` = queue, ``timestamp``, ``value``), cut at ``now``."""

    def __init__(self, path: Path, *, lookback_h: float = 24) -> None:
        self.path, self.lookback = path, pd.Timedelta(hours=lookback_h)

    def pending(self, now: pd.Timestamp) -> pd.DataFrame:
        from predictor.sources.files import read_history

        frame = read_history(self.path)
        keep = (frame[TIME] <= now) & (frame[TIME] > now - self.lookback)
        return frame.loc[keep, [ID, TIME, VALUE]].reset_index(drop=True)


class FrameJobs:
    """Pending GPUs per queue from a frame in memory (the demo, replay): rows after ``now`` are not seen."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame.assign(**{TIME: pd.to_datetime(frame[TIME], utc=True)})

    def pending(self, now: pd.Timestamp) -> pd.DataFrame:
        return self.frame.loc[self.frame[TIME] <= now, [ID, TIME, VALUE]].reset_index(drop=True)


def _empty() -> pd.DataFrame:
    return pd.DataFrame(
        {c: pd.Series(dtype=float if c in ("peak", "now", "quantile", "horizon_h") else object) for c in COLUMNS}
    )


class EstimatorDemand:
    """A fitted ``gpu-demand`` estimator (``predict_queues``) served as it is, with the jobs each queue holds."""

    def __init__(
        self,
        estimator: Any,
        jobs: JobsReader,
        *,
        version: str = "local",
        family: str = DEMAND_FAMILY,
        resource: str = "nvidia.com/gpu",
        fresh_s: float = 2 * 3600,
    ) -> None:
        self.estimator, self.jobs, self.family, self.resource = estimator, jobs, family, resource
        self.version, self.uri, self.fresh = version, model_uri(family, version), pd.Timedelta(seconds=fresh_s)

    def demand(self, history: pd.DataFrame, now: pd.Timestamp) -> DemandPrediction:
        from models.demand_queue import WEEK_H

        versions = {self.family: self.version}
        queues = sorted(history[ID].astype(str).unique()) if not history.empty else []
        pending = self.jobs.pending(now)
        times = pd.to_datetime(pending[TIME], utc=True)
        fresh = pending.loc[(times <= now) & (times > now - self.fresh)]
        have_jobs = set(fresh[ID].astype(str))
        unknown = {
            q: f"no pending-jobs series for this queue in the last {self.fresh.total_seconds() / 3600:g} h"
            for q in queues
            if q not in have_jobs
        }
        known = [q for q in queues if q in have_jobs]
        if not known:
            return DemandPrediction(_empty(), unknown, versions)
        rows = history.loc[history[ID].astype(str).isin(known)]
        hourly = pd.concat(
            [
                pd.DataFrame(
                    {
                        ID: rows[ID].astype(str),
                        TIME: pd.to_datetime(rows[TIME], utc=True),
                        "demand": pd.to_numeric(rows[VALUE], errors="coerce"),
                        "pending": float("nan"),
                    }
                ),
                pd.DataFrame(
                    {
                        ID: fresh[ID].astype(str),
                        TIME: pd.to_datetime(fresh[TIME], utc=True),
                        "demand": float("nan"),
                        "pending": pd.to_numeric(fresh[VALUE], errors="coerce"),
                    }
                ),
            ],
            ignore_index=True,
        )
        try:
            peaks = self.estimator.predict_queues(hourly)
        except (ValueError, AttributeError) as exc:
            why = f"{self.uri} cannot predict queues: {exc}".splitlines()[0]
            return DemandPrediction(_empty(), {**unknown, **dict.fromkeys(known, why)}, versions)
        predicted = set(peaks[ID].astype(str))
        for q in known:
            if q not in predicted:
                unknown[q] = f"less than a week ({WEEK_H} h) of gap-free hourly demand history"
        quantile = float(getattr(self.estimator, "quantile", float("nan")))
        horizon = float(getattr(self.estimator, "queue_horizon_h_", float("nan")))
        frame = pd.DataFrame(
            {
                "queue": peaks[ID].astype(str).to_numpy(),
                "resource": self.resource,
                "peak": peaks["peak"].to_numpy(float),
                "now": peaks["now"].to_numpy(float),
                "quantile": quantile,
                "horizon_h": horizon,
                "model": self.uri,
                "timestamp": pd.to_datetime(peaks[TIME], utc=True).dt.strftime("%Y-%m-%dT%H:%M:%SZ").to_numpy(),
            },
            columns=list(COLUMNS),
        )
        return DemandPrediction(frame, unknown, versions)


class RegistryDemand:
    """The ``gpu-demand`` champion from the model registry, as registered; no champion → demand unknown.

    Held in memory like the forecaster (``ChampionCache``): loaded once per champion version, the last
    good model kept serving when a newer one fails to load, and both reported on ``/metrics``.
    """

    def __init__(
        self,
        registry: ChampionRegistry,
        jobs: JobsReader,
        *,
        family: str = DEMAND_FAMILY,
        resource: str = "nvidia.com/gpu",
        metrics: LoopMetrics | None = None,
    ) -> None:
        self.registry, self.jobs, self.family, self.resource = registry, jobs, family, resource
        self.champion = ChampionCache(registry, family, metrics)

    def report_to(self, metrics: LoopMetrics) -> None:
        self.champion.metrics = metrics

    def demand(self, history: pd.DataFrame, now: pd.Timestamp) -> DemandPrediction:
        queues = sorted(history[ID].astype(str).unique()) if not history.empty else []
        try:
            served, version = self.champion.current()
        except RegistryError as exc:
            why = str(exc).splitlines()[0]
            return DemandPrediction(_empty(), dict.fromkeys(queues, why), {})
        return EstimatorDemand(
            served.estimator, self.jobs, version=version, family=self.family, resource=self.resource
        ).demand(history, now)
