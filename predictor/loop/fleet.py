"""A fleet's loop: one cycle per cluster each interval, each cluster on its own API, Lease, plans and state.

With clusters listed in the settings (``Settings.clusters``) the loop runs one ``Loop`` per cluster, wired
by ``predictor.commands._loop_fleet``. Each reads its own cluster's metrics and Kubernetes API, holds its own
Lease (``<loop.lease_name>-<cluster>``, so one loop per cluster acts, and two clusters never wait for each
other's), writes its plans to ``<plan_dir>/<cluster>/`` and keeps its own state file; all share one audit
log, every record carrying ``cluster``, and one local lock on it. The clusters run one after the other, and
a cluster whose cycle fails (API down, Prometheus down, even a bug) is recorded and reported while the
others run: a fleet cycle never stops at one cluster.

The model is the fleet's: one forecaster serves every cluster, with series named ``<cluster>/<queue>`` as
training registered them (``QualifiedForecaster``), while the planner sees queue names.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from models.frames import ID
from predictor.config import Settings
from predictor.errors import InputError, PredictorError
from predictor.loop.cycle import CycleReport, Loop
from predictor.loop.fleet_metrics import FleetMetrics
from predictor.loop.inputs import Forecaster
from predictor.loop.leader import Leader
from predictor.loop.waiting import wait_and_watch, wait_for_next_cycle
from predictor.sources.clusters import SEPARATOR, qualify

__all__ = ["ClusterRows", "FleetLoop", "FleetReport", "QualifiedForecaster", "cluster_settings"]


def cluster_settings(settings: Settings, name: str) -> Settings:
    """One cluster's settings: plans in ``<plan_dir>/<name>/``, the Lease ``<loop.lease_name>-<name>``."""
    actuators = settings.actuators.model_copy(update={"plan_dir": settings.actuators.plan_dir / name})
    loop = settings.loop.model_copy(update={"lease_name": f"{settings.loop.lease_name}-{name}"})
    return settings.model_copy(update={"actuators": actuators, "loop": loop})


class QualifiedForecaster:
    """The fleet's forecaster for one cluster: asked with ``<cluster>/<queue>`` ids, answering by queue name.

    The registered model keeps per-series state under the qualified ids training gave it, so equal queue
    names of two clusters are two series there too; the cycle and the planner keep queue names.
    """

    def __init__(self, inner: Forecaster, cluster: str) -> None:
        self.inner, self.cluster = inner, cluster

    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        prefix = qualify(self.cluster, "")
        frame, versions = self.inner.forecast(history.assign(**{ID: prefix + history[ID].astype(str)}), horizon=horizon)
        ids = frame[ID].astype(str)
        mine = ids.str.startswith(prefix)
        return frame.loc[mine].assign(**{ID: ids[mine].str.slice(len(prefix))}).reset_index(drop=True), versions


class ClusterRows:
    """One cluster's rows of a fleet file (``series_id`` = ``<cluster>/<queue>``), named by queue alone.

    A history (``history``) or pending-jobs (``pending``) reader over a ``--history`` / ``--pending`` file
    that holds every cluster, the way training frames name fleet series.
    """

    def __init__(self, read: Callable[[pd.Timestamp], pd.DataFrame], cluster: str, *, source: str = "history") -> None:
        self.read, self.prefix, self.source = read, f"{cluster}{SEPARATOR}", source

    def _rows(self, now: pd.Timestamp) -> pd.DataFrame:
        frame = self.read(now)
        ids = frame[ID].astype(str)
        if len(ids) and not ids.str.contains(SEPARATOR, regex=False).any():
            # A one-cluster file given to a fleet: no cluster's rows, and "no history" would hide why.
            raise InputError(
                f"{self.source}: no series names its cluster (with clusters in the settings, "
                f"series are {self.prefix}<queue>; found {ids.iloc[0]!r})"
            )
        mine = ids.str.startswith(self.prefix)
        return frame.loc[mine].assign(**{ID: ids[mine].str.slice(len(self.prefix))}).reset_index(drop=True)

    def history(self, now: pd.Timestamp) -> pd.DataFrame:
        return self._rows(now)

    def pending(self, now: pd.Timestamp) -> pd.DataFrame:
        return self._rows(now)


@dataclass
class FleetReport:
    """What one fleet cycle did: each cluster's report, and the clusters whose cycle raised (with why)."""

    reports: dict[str, CycleReport] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


class FleetLoop:
    """The loops of a fleet's clusters, cycled one after the other; one cluster's failure stops no other."""

    def __init__(self, loops: Sequence[Loop], *, lock: Leader, metrics: FleetMetrics | None = None) -> None:
        names = [loop.name for loop in loops]
        if not loops or None in names or len(set(names)) != len(names):
            raise ValueError(f"a fleet needs loops with distinct cluster names, got {names}")
        self.loops, self.lock = list(loops), lock
        # Default: the loops' own metrics, merged (``metrics`` is given where the served model reports too).
        self.metrics = metrics or FleetMetrics({str(loop.name): loop.metrics for loop in loops})
        self._forever = False
        self._leading: list[Loop] = []  # clusters whose locks this instance held at the last renewal

    def run_once(self, *, force: bool = False) -> FleetReport:
        """One cycle of every cluster; outside ``run_forever`` the local lock is given up after it."""
        try:
            return self.run_cycle(force=force)
        finally:
            if not self._forever:
                self.lock.release()

    def run_cycle(self, *, force: bool = False) -> FleetReport:
        report = FleetReport()
        for loop in self.loops:
            name = str(loop.name)
            try:
                report.reports[name] = loop.run_cycle(force=force)
            except Exception as exc:  # a cluster's failure (even a bug) is its own: the next cluster runs
                if not isinstance(exc, PredictorError):  # a PredictorError was counted by the cycle itself
                    loop.metrics.cycles.labels(result="error").inc()
                try:
                    report.failed[name] = loop.fail(exc)
                except PredictorError as unrecorded:  # the audit log itself failed: still report, go on
                    report.failed[name] = f"{exc}; not recorded: {unrecorded}".splitlines()[0]
        return report

    def run_forever(
        self,
        stop: Callable[[], bool],
        sleep: Callable[[float], object] = time.sleep,
        renew_every_s: float | None = None,
    ) -> None:
        """Every ``loop.interval_s`` one fleet cycle until ``stop()``, renewing every cluster's Lease between;
        with ``planner.react_pending_gpus`` on, each cluster it leads also re-plans between slots."""
        self._forever = True
        first = self.loops[0]
        renew_every_s = renew_every_s or first.settings.loop.lease_renew_s
        reacting = [loop for loop in self.loops if loop.react.enabled]
        try:
            while not stop():
                self.run_cycle()
                if reacting:
                    wait_and_watch(
                        first.settings.loop.interval_s,
                        first.clock,
                        stop,
                        sleep,
                        renew_every_s=renew_every_s,
                        poll_s=first.react.poll_s,
                        renew=self._renew_leading,
                        watch=self._watch,
                    )
                else:
                    wait_for_next_cycle(
                        first.settings.loop.interval_s, first.clock, stop, sleep, renew_every_s, renew=self.renew
                    )
        finally:
            self.close()

    def renew(self) -> None:
        """Take or renew every cluster's locks between cycles (a standby cluster tries to take its Lease)."""
        for loop in self.loops:
            loop.lead(loop.clock())

    def _renew_leading(self) -> str:
        """``renew``, keeping the clusters this instance leads (only they watch their queues between slots)."""
        self._leading = [loop for loop in self.loops if not loop.lead(loop.clock())]
        return ""

    def _watch(self) -> None:
        for loop in self._leading:
            if loop.react.enabled:
                loop.watch_pending()  # records its own failures: one cluster's never stops another's

    def close(self) -> None:
        """Give up every cluster's Lease and the shared local lock."""
        for loop in self.loops:
            loop.close()
        self.lock.release()
