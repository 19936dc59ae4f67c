"""Root-cause diagnosis in the loop: the ``gpu-rca`` champion run on the Prometheus window when a trigger fires.

Each cycle reads the trigger series (``predictor.loop.rca_triggers``) over ``2 × loop.diagnose.window_s``;
when a queue's demand, a job's GPU utilisation or a job's restarts left their band, the rest of the model's
metric families are read for the same window and ``predictor.diagnose.engine.diagnose`` names the causes.
Every finding is recorded three ways: an audit record (outcome ``finding``, citing the served model's URI),
the gauge ``predictor_rca_finding{cause,node,queue}`` (the probability; the last diagnosis' findings, cleared
when a cycle finds nothing out of band) and, for a fault, a hold of the queue its stalled jobs belong to
(code ``rca_fault``): a queue slowed by a bad node is not grown to make up for it. Slowdowns of demand
(``scheduling_starvation``: the queue waits on its quota) hold nothing.

The champion is served as registered (``RegistryRca``): loaded once per version through ``ChampionCache``,
the last good model kept when a newer one fails to load or is not a root-cause model. A failed diagnosis
(Prometheus down, no champion, a bug) is logged, counted and audited; it never fails the cycle.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd

from predictor.actuators.audit import AuditLog, AuditRecord
from predictor.diagnose.engine import NEEDED_METRICS, diagnose, fetch_window
from predictor.diagnose.models import check_registered
from predictor.loop.champion import ChampionCache, model_uri
from predictor.loop.rca_triggers import (
    TRIGGER_METRICS,
    Trigger,
    demand_triggers,
    pod_owners,
    restart_triggers,
    util_triggers,
)
from predictor.registry import RCA_FAMILY

if TYPE_CHECKING:
    from predictor.config import DiagnoseLoopSettings
    from predictor.loop.metrics import LoopMetrics
    from predictor.loop.seams import ChampionRegistry
    from predictor.registry import ModelVersionInfo
    from predictor.registry.served import ServedModel
    from predictor.sources import MetricSource

__all__ = ["NOT_FAULTS", "LoopRca", "RcaModel", "RcaOutcome", "RegistryRca", "summary"]

log = logging.getLogger(__name__)

# Answers that are not a fault of the cluster: nothing wrong, not enough measured, or a queue waiting on its
# quota (demand: growing the queue is the remedy, not holding it).
NOT_FAULTS = ("healthy", "insufficient_data", "scheduling_starvation")


class RcaModel(Protocol):
    """The root-cause model to diagnose with, and the URI that names it in findings."""

    def model(self) -> tuple[Any, str]: ...


class _Checked:
    """A registry whose loads of ``gpu-rca`` hold a model ``diagnose`` takes (else the load fails, and the
    champion cache keeps the last good model)."""

    def __init__(self, registry: ChampionRegistry) -> None:
        self.registry = registry

    def get(self, family: str) -> ModelVersionInfo | None:
        return self.registry.get(family)

    def load(self, family: str) -> ServedModel:
        served = self.registry.load(family)
        check_registered(served.estimator, model_uri(family, str(served.version)))
        return served


class RegistryRca:
    """``gpu-rca@champion`` served as registered: reloaded when the champion's version changes."""

    def __init__(self, registry: ChampionRegistry, metrics: LoopMetrics | None = None) -> None:
        self.champion = ChampionCache(_Checked(registry), RCA_FAMILY, metrics)

    def report_to(self, metrics: LoopMetrics) -> None:
        self.champion.metrics = metrics

    def model(self) -> tuple[Any, str]:
        served, version = self.champion.current()
        return served.estimator, model_uri(RCA_FAMILY, version)


@dataclass
class RcaOutcome:
    """One cycle's diagnosis: what triggered it, the findings, the queues held, the audit records, any error."""

    triggers: list[Trigger] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)
    held: dict[str, tuple[str, str]] = field(default_factory=dict)
    records: list[AuditRecord] = field(default_factory=list)
    error: str = ""


def _queue_of(finding: dict[str, Any], jobs: dict[str, str]) -> str:
    """The queue a finding is about: a queue candidate's own, else the queue of the job it names."""
    where = str(finding.get("explanation", "")).split(":", 1)[0]
    if where.startswith("queue="):  # a queue candidate (its scope names no node or job)
        return where.removeprefix("queue=")
    return jobs.get(str(finding["scope"].get("job") or ""), "")


class LoopRca:
    """Triggers, diagnosis and its records for one loop (``loop.diagnose``); ``run`` never raises."""

    def __init__(
        self,
        settings: DiagnoseLoopSettings,
        source: MetricSource,
        models: RcaModel,
        metrics: LoopMetrics,
        *,
        cluster: str | None = None,
    ) -> None:
        self.settings, self.source, self.models, self.metrics, self.cluster = settings, source, models, metrics, cluster
        self.window = pd.Timedelta(seconds=settings.window_s)
        self.step = pd.Timedelta(seconds=settings.step_s)
        self.last: RcaOutcome | None = None  # the last cycle's diagnosis (what `predictor loop --once` prints)

    def hold(
        self,
        held: dict[str, tuple[str, str]],
        audit: AuditLog,
        now: pd.Timestamp,
        cycle: str,
        mode: str,
        *,
        history: pd.DataFrame | None = None,
        forecast: pd.DataFrame | None = None,
    ) -> RcaOutcome:
        """One cycle's diagnosis, audited; the queues it holds are added to ``held`` (an earlier hold wins)."""
        outcome = self.last = self.run(now, cycle, mode, history=history, forecast=forecast)
        audit.append(outcome.records)
        for queue, why in outcome.held.items():
            held.setdefault(queue, why)
        return outcome

    def run(
        self,
        now: pd.Timestamp,
        cycle: str,
        mode: str,
        *,
        history: pd.DataFrame | None = None,
        forecast: pd.DataFrame | None = None,
    ) -> RcaOutcome:
        outcome = RcaOutcome()
        try:
            self._diagnose(now, history, forecast, outcome)
        except Exception as exc:  # a diagnosis (even a bug in one) must never fail the cycle
            outcome.error = (str(exc).splitlines() or [type(exc).__name__])[0]
            log.warning("root-cause diagnosis at %s failed: %s", now.isoformat(), outcome.error, exc_info=True)
            self.metrics.rca_diagnoses.labels(result="failed").inc()
        outcome.records = self._records(now, cycle, mode, outcome)
        return outcome

    def _diagnose(
        self, now: pd.Timestamp, history: pd.DataFrame | None, forecast: pd.DataFrame | None, outcome: RcaOutcome
    ) -> None:
        frame = fetch_window(self.source, now, self.window, self.step, TRIGGER_METRICS)
        outcome.triggers = [
            *demand_triggers(history, forecast, now),
            *util_triggers(frame, now, self.window),
            *restart_triggers(frame, now, self.window),
        ]
        for trigger in outcome.triggers:
            self.metrics.rca_triggers.labels(trigger=trigger.kind).inc()
        if not outcome.triggers:
            self.metrics.rca_finding.clear()  # nothing out of band: the last findings are no longer current
            return
        model, uri = self.models.model()
        rest = fetch_window(
            self.source, now, self.window, self.step, [m for m in NEEDED_METRICS if m not in TRIGGER_METRICS]
        )
        window = pd.concat([f for f in (frame, rest) if not f.empty], ignore_index=True) if len(rest) else frame
        result = diagnose(window, model, now, self.window, min_probability=self.settings.min_probability)
        self.metrics.rca_diagnoses.labels(result="ok").inc()
        jobs = {job: queue for job, queue in pod_owners(window).values() if job and queue}
        jobs.update({t.subject: t.queue for t in outcome.triggers if t.kind != "demand_band" and t.queue})
        self.metrics.rca_finding.clear()
        for finding in result["findings"]:
            scope = finding["scope"]
            queue = _queue_of(finding, jobs)
            outcome.findings.append({**finding, "queue": queue, "model": uri})
            cause = str(finding["cause"])
            if cause in ("healthy", "insufficient_data"):
                continue
            node = str(scope.get("node") or "")
            self.metrics.rca_finding.labels(cause=cause, node=node, queue=queue).set(float(finding["probability"]))
            if cause not in NOT_FAULTS and queue and queue not in outcome.held:
                where = f"node {node}" if node else "its jobs"
                outcome.held[queue] = (
                    "rca_fault",
                    f"{cause} ({finding['probability']:.2f}) on {where} stalls job {scope.get('job') or '?'}: "
                    f"a fault, not demand ({uri})",
                )

    def _records(self, now: pd.Timestamp, cycle: str, mode: str, outcome: RcaOutcome) -> list[AuditRecord]:
        def record(queue: str, reason: str, code: str, **extra: Any) -> AuditRecord:
            return AuditRecord(
                timestamp=now.isoformat(),
                cycle=cycle,
                queue=queue or "*",
                field=None,
                before=None,
                after=None,
                reason=reason,
                mode=mode,
                outcome="finding",
                code=code,
                unix=now.timestamp(),
                cluster=self.cluster,
                **extra,
            )

        why = "; ".join(t.reason for t in outcome.triggers[:5]) + (
            f" and {len(outcome.triggers) - 5} more" if len(outcome.triggers) > 5 else ""
        )
        if outcome.error:
            return [
                record(
                    "*", f"diagnosis failed: {outcome.error}" + (f" (triggered by {why})" if why else ""), "rca_failed"
                )
            ]
        records = []
        for f in outcome.findings:
            scope = f["scope"]
            summary = {
                "cause": f["cause"],
                "probability": f["probability"],
                "node": scope.get("node"),
                "gpu": scope.get("gpu"),
                "job": scope.get("job"),
                "queue": f["queue"] or None,
            }
            records.append(
                record(
                    f["queue"],
                    f"{f['explanation']} → {f['remediation']} (triggered by {why})",
                    str(f["cause"]),
                    models={RCA_FAMILY: f["model"]},
                    finding=summary,
                )
            )
        return records


def summary(outcome: RcaOutcome) -> str:
    """One line for a person: what triggered the diagnosis and the faults found (``""``: nothing triggered)."""
    if outcome.error:
        return f"root-cause diagnosis failed: {outcome.error}"
    if not outcome.triggers:
        return ""
    faults = [f for f in outcome.findings if f["cause"] not in ("healthy", "insufficient_data")]
    found = ", ".join(
        f"{f['cause']} ({f['probability']:.2f})"
        + "".join(f" {k} {v}" for k, v in (("node", f["scope"].get("node")), ("queue", f["queue"])) if v)
        for f in faults[:5]
    )
    return f"root causes after {len(outcome.triggers)} trigger(s): {found or 'none found'}"
