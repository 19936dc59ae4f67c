"""The loop's own metrics and probes: ``/metrics`` (Prometheus text) and ``/ready``, on one small server.

An injected ``CollectorRegistry`` (not the global one) keeps tests and several loops in one process apart.
Labels are low-cardinality on purpose: reasons are codes (``dead_band``, ``cooldown``…), not free text.
Times come from the loop's clock (``succeeded(now)``); only readiness measures real elapsed time, since
the probe asks whether this process still completes cycles, whatever clock the loop plans with.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest

from predictor.config import LoopSettings

__all__ = ["LoopMetrics", "MetricsServer", "Probed"]


class LoopMetrics:
    """Counters and gauges of the scheduling loop."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        ready_within_s: float | None = None,
        live_within_s: float | None = None,
        elapsed: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        """``ready_within_s`` and ``live_within_s`` default to ``LoopSettings``' of the default interval;
        ``wall`` is the clock model ages are measured on (the registry stamps versions in real time)."""
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.cycles = Counter("predictor_loop_cycles", "Loop cycles by result.", ["result"], registry=r)
        self.last_success = Gauge(
            "predictor_loop_last_success_timestamp_seconds",
            "Unix time of the last cycle that planned (and applied) without error.",
            registry=r,
        )
        self.last_cycle_seconds = Gauge(
            "predictor_loop_cycle_duration_seconds", "Duration of the last cycle.", registry=r
        )
        self.changes = Counter(
            "predictor_loop_changes", "Queue field changes by mode and outcome.", ["mode", "outcome"], registry=r
        )
        self.held = Counter("predictor_loop_held", "Held or clipped decisions by reason code.", ["reason"], registry=r)
        self.band = Gauge(
            "predictor_loop_forecast_gpus",
            "Forecast for the next hour per queue and band.",
            ["queue", "band"],
            registry=r,
        )
        self.quota = Gauge(
            "predictor_loop_desired_quota_gpus", "Desired quota per queue and field.", ["queue", "field"], registry=r
        )
        # FGD (predictor.planner.fragmentation) of the last cycle's nodes and pods: fgd_gpus, rate (÷ free),
        # free_gpus, free_nodes (whole free nodes). Absent while the workload is unknown.
        self.fragmentation = Gauge(
            "predictor_loop_fragmentation",
            "GPU fragmentation (FGD) of the cluster by measure.",
            ["measure"],
            registry=r,
        )
        self.model = Gauge(
            "predictor_loop_model_info",
            "Model versions used by the last cycle (value 1).",
            ["family", "version"],
            registry=r,
        )
        self.served_model = Gauge(
            "predictor_loop_served_model_info",
            "Model held in memory and served per family (value 1), by model URI.",
            ["family", "uri"],
            registry=r,
        )
        self.served_stale = Gauge(
            "predictor_loop_served_model_stale",
            "1 while the served model is older than the champion (the champion failed to "
            "load and the last good model is kept).",
            ["family"],
            registry=r,
        )
        self.load_failures = Counter(
            "predictor_loop_model_load_failures",
            "Champion loads that failed (the last good model kept serving).",
            ["family"],
            registry=r,
        )
        # Model lifecycle (predictor.loop.champion): how old the served version is, the age it is alerted at,
        # and the promotion rule (predictor.registry.promotion) that made it champion.
        self.model_age = Gauge(
            "predictor_loop_model_age_seconds",
            "Seconds since the served model version was registered, per family.",
            ["family"],
            registry=r,
        )
        self.model_max_age = Gauge(
            "predictor_loop_model_max_age_seconds",
            "Maximum champion age (mlflow.max_champion_age_days) in seconds; an older served model alerts.",
            ["family"],
            registry=r,
        )
        self.promotion = Gauge(
            "predictor_loop_model_promotion_info",
            "Why the served version became champion (value 1): the promotion rule's code.",
            ["family", "version", "decision"],
            registry=r,
        )
        self._promotion: dict[str, tuple[str, str]] = {}
        self._aged: set[str] = set()
        self._max_age_s: float | None = None
        self.wall = wall
        # planner.react_pending_gpus (predictor.loop.react): re-plans between interval slots, and the reads of
        # queues and pending GPUs between slots that failed (the loop kept waiting).
        self.react_cycles = Counter(
            "predictor_loop_react_cycles",
            "Re-plans between interval slots triggered by queues waiting on pending GPUs.",
            registry=r,
        )
        self.react_read_failures = Counter(
            "predictor_loop_react_read_failures",
            "Reads of queues or pending GPUs between slots that failed.",
            registry=r,
        )
        self.capacity_hold = Gauge(
            "predictor_loop_capacity_hold",
            "1 while every queue holds because live allocatable GPUs collapsed (code capacity_drop).",
            registry=r,
        )
        self.capacity_reference = Gauge(
            "predictor_loop_capacity_reference_gpus",
            "The capacity reference a drop is measured against: the high-water mark of allocatable.",
            ["resource"],
            registry=r,
        )
        # Root-cause diagnosis (predictor.loop.rca): the findings of the last diagnosis (value: probability),
        # the diagnoses run (ok or failed) and the triggers that started them.
        self.rca_finding = Gauge(
            "predictor_rca_finding",
            "Root-cause findings of the last diagnosis by the gpu-rca champion (value: probability).",
            ["cause", "node", "queue"],
            registry=r,
        )
        self.rca_diagnoses = Counter(
            "predictor_loop_rca_diagnoses", "Root-cause diagnoses run by the loop, by result.", ["result"], registry=r
        )
        self.rca_triggers = Counter(
            "predictor_loop_rca_triggers",
            "Triggers of a root-cause diagnosis: demand_band, gpu_util_band, job_restart.",
            ["trigger"],
            registry=r,
        )
        self._served_uri: dict[str, str] = {}
        self._children: dict[tuple[int | str, ...], Gauge] = {}
        self.last_success_unix = 0.0
        self.ready_within_s = LoopSettings().ready_within_s if ready_within_s is None else ready_within_s
        self.elapsed = elapsed
        self._succeeded_at: float | None = None  # on the ``elapsed`` clock
        self.live_within_s = LoopSettings().live_within_s if live_within_s is None else live_within_s
        self._completed_at = elapsed()  # the start counts as a completion: the first cycle gets its full time

    def child(self, gauge: Gauge, *values: str) -> Gauge:
        """``gauge.labels(*values)``, looked up once: the per-queue gauges (``band``, ``quota``) set thousands
        of children each fleet cycle and are never cleared, so a child once made stays the registry's."""
        key: tuple[int | str, ...] = (id(gauge), *values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = gauge.labels(*values)
        return found

    def succeeded(self, now_unix: float) -> None:
        """A cycle planned (and applied) without error at ``now_unix`` (the loop's clock)."""
        self.last_success_unix = now_unix
        self.last_success.set(now_unix)
        self._succeeded_at = self.elapsed()

    def capacity(self, reference: Mapping[str, float] | None, held: bool) -> None:
        """This cycle's capacity reference (none: cleared) and whether it held every queue for a collapse."""
        self.capacity_hold.set(1 if held else 0)
        self.capacity_reference.clear()
        for resource, value in (reference or {}).items():
            self.capacity_reference.labels(resource=resource).set(value)

    def completed(self) -> None:
        """A cycle ended, well or not (a standby or a failed cycle still shows the loop is not hung)."""
        self._completed_at = self.elapsed()

    def live(self) -> tuple[bool, str]:
        """Alive while cycles keep completing: a cycle hung on a call that never returns fails this."""
        age = self.elapsed() - self._completed_at
        if age > self.live_within_s:
            return False, f"no cycle completed for {age:.0f} s (limit {self.live_within_s:.0f} s)"
        return True, "ok"

    def models(self, versions: Mapping[str, str]) -> None:
        self.model.clear()
        for family, version in versions.items():
            self.model.labels(family=family, version=version).set(1)

    def served(self, family: str, uri: str, *, stale: bool, failed: bool) -> None:
        """What ``family`` serves from memory now, whether it is stale, and one more failed load if ``failed``."""
        previous = self._served_uri.get(family)
        if previous is not None and previous != uri:  # one URI per family: the one in memory now
            self.served_model.remove(family, previous)
        self._served_uri[family] = uri
        self.served_model.labels(family=family, uri=uri).set(1)
        self.served_stale.labels(family=family).set(1 if stale else 0)
        counter = self.load_failures.labels(family=family)  # exported at 0 before the first failure
        if failed:
            counter.inc()

    def max_model_age(self, seconds: float) -> None:
        """The maximum champion age, exported with the first served model's lifecycle (none served: no sample)."""
        self._max_age_s = seconds

    def lifecycle(self, family: str, version: str, *, registered_unix: float | None, decision: str) -> None:
        """The served version's age (none known: no sample) and the promotion rule that made it champion."""
        if self._max_age_s is not None:
            self.model_max_age.labels(family=family).set(self._max_age_s)
        if registered_unix is None:
            if family in self._aged:  # a version without a registration time: no age rather than a stale one
                self.model_age.remove(family)
                self._aged.discard(family)
        else:
            self.model_age.labels(family=family).set(max(0.0, self.wall() - registered_unix))
            self._aged.add(family)
        previous = self._promotion.get(family)
        if previous is not None and previous != (version, decision):
            self.promotion.remove(family, *previous)
        self._promotion[family] = (version, decision)
        self.promotion.labels(family=family, version=version, decision=decision).set(1)

    def ready(self) -> tuple[bool, str]:
        """Ready once a cycle succeeded, and while the last success is fresh enough."""
        if self._succeeded_at is None:
            return False, "no successful cycle yet"
        age = self.elapsed() - self._succeeded_at
        if age > self.ready_within_s:
            return False, f"last successful cycle {age:.0f} s ago"
        return True, "ok"


class Probed(Protocol):
    """What the server serves: a registry for ``/metrics`` and a readiness answer for ``/ready`` (a loop's
    ``LoopMetrics``, or a fleet's ``FleetMetrics``)."""

    registry: CollectorRegistry

    def ready(self) -> tuple[bool, str]: ...

    def live(self) -> tuple[bool, str]: ...


class MetricsServer:
    """Serves ``/metrics``, ``/ready`` and ``/healthz`` in a daemon thread."""

    def __init__(self, metrics: Probed, port: int, address: str = "0.0.0.0") -> None:  # noqa: S104
        self.metrics = metrics
        handler = _handler(metrics)
        self.httpd = ThreadingHTTPServer((address, port), handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> MetricsServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def _handler(metrics: Probed) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/metrics"):
                code, ctype, body = 200, CONTENT_TYPE_LATEST, generate_latest(metrics.registry)
            elif self.path.startswith("/ready"):
                ok, why = metrics.ready()
                code, ctype, body = (200 if ok else 503), "text/plain", why.encode() + b"\n"
            elif self.path.startswith("/healthz"):
                ok, why = metrics.live()
                code, ctype, body = (200 if ok else 503), "text/plain", why.encode() + b"\n"
            else:
                code, ctype, body = 404, "text/plain", b"not found\n"
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
