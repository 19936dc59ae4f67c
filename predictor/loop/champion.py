"""A registered champion held in memory: loaded once per version, the last good one kept when a load fails.

Both seams that serve from the model registry (``RegistryForecaster`` for ``gpu-forecast``,
``RegistryDemand`` for ``gpu-demand``) hold their model through ``ChampionCache``, so a cycle reads the
champion's version record (one small registry call), downloads files only when the champion moved, and
both families report the same lifecycle on the loop's ``/metrics``: the version served, its age since it
was registered, the promotion rule that made it champion, whether it is stale (a newer champion failed to
load), and failed loads. The age is what an operator alerts on: a retrain that never promotes shows up as
a served model growing older than its maximum age.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from predictor.errors import RegistryError
from predictor.registry import DECISION_TAG

if TYPE_CHECKING:
    from predictor.loop.metrics import LoopMetrics
    from predictor.loop.seams import ChampionRegistry
    from predictor.registry import ModelVersionInfo
    from predictor.registry.served import ServedModel

__all__ = ["ChampionCache", "model_uri"]

log = logging.getLogger(__name__)


def model_uri(family: str, version: str) -> str:
    """How served versions are named everywhere (audit, plan.json, ``/metrics``): ``models:/gpu-forecast/7``."""
    return f"models:/{family}/{version}"


class ChampionCache:
    """The champion of ``family`` in memory, refreshed when the registry's champion version changes."""

    def __init__(self, registry: ChampionRegistry, family: str, metrics: LoopMetrics | None = None) -> None:
        self.registry, self.family, self.metrics = registry, family, metrics
        self.served: ServedModel | None = None
        self.version: str | None = None  # the version in memory
        self.info: ModelVersionInfo | None = None  # its registry record (registration time, promotion tags)
        self.stale = ""  # why the model in memory is not the champion ("" when it is)

    def current(self) -> tuple[ServedModel, str]:
        """The model to serve and its version: the one in memory unless the champion moved and the new one
        loads. With nothing in memory a failure is raised (after counting a failed load, if one was tried)."""
        info = None
        try:
            info = self.registry.get(self.family)
            if info is None:
                raise RegistryError(f"no champion for {self.family} in the model registry")
            if info.version != self.version or self.served is None:
                loaded = self.registry.load(self.family)
                # ModelRegistry.load answers a failed load with the last model it loaded: an older version
                got = str(loaded.version or info.version)
                if got != info.version:
                    raise RegistryError(
                        f"champion {model_uri(self.family, info.version)} did not load (the registry served v{got})"
                    )
                self.served, self.version, self.info, self.stale = loaded, got, info, ""
        except RegistryError as exc:
            if self.served is None or self.version is None:
                if info is not None and self.metrics is not None:  # a champion exists and did not load
                    self.metrics.load_failures.labels(family=self.family).inc()
                raise
            self.stale = str(exc)
            log.warning("serving %s from memory: %s", model_uri(self.family, self.version), exc)
            self._report(failed=True)
            return self.served, self.version
        self._report(failed=False)
        return self.served, self.version

    def _report(self, *, failed: bool) -> None:
        if self.metrics is None or self.version is None:
            return
        self.metrics.served(self.family, model_uri(self.family, self.version), stale=bool(self.stale), failed=failed)
        info = self.info
        self.metrics.lifecycle(
            self.family,
            self.version,
            registered_unix=None if info is None else info.created_unix,
            decision=(info.tags.get(DECISION_TAG) if info is not None else None) or "unknown",
        )
