"""How ``predictor loop`` builds the parts every loop has, one cluster or a fleet: the forecaster, the demand
model, the leader Lease and the XDP inputs (``predictor.commands.loop`` and ``_loop_fleet`` both wire them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from predictor.errors import InputError

if TYPE_CHECKING:  # the loop, the actuator and their clients load when a command runs
    from predictor.actuators.volcano import VolcanoActuator
    from predictor.config import Settings
    from predictor.loop import Forecaster, Loop
    from predictor.loop.demand import DemandReader, JobsReader
    from predictor.loop.leader import LeaseLock
    from predictor.loop.metrics import LoopMetrics
    from predictor.loop.rca import RegistryRca
    from predictor.sources import MetricSource

__all__ = ["demand", "forecaster", "lease", "rca_model", "wire_rca", "wire_xdp"]


def forecaster(settings: Settings, model: str | None) -> Forecaster:
    """``--model NAME``: that forecaster, unregistered; otherwise the registry's champion."""
    from predictor.loop import EstimatorForecaster, RegistryForecaster

    if model is not None:
        from models.forecast import UnknownForecasterError, forecasters

        try:
            estimator = forecasters.create(model)
        except UnknownForecasterError as exc:
            raise InputError(f"--model: {exc}") from exc
        return EstimatorForecaster(estimator, version=f"{model} (unregistered)")
    from predictor.registry import ModelRegistry

    return RegistryForecaster(ModelRegistry(settings.mlflow))


def demand(settings: Settings, jobs: JobsReader | None) -> DemandReader | None:
    """The registry's gpu-demand champion over the pending jobs; none without job data to serve it from."""
    if jobs is None:
        return None
    from predictor.loop.demand import RegistryDemand
    from predictor.registry import ModelRegistry

    return RegistryDemand(ModelRegistry(settings.mlflow), jobs, resource=settings.planner.resource)


def lease(settings: Settings, actuator: VolcanoActuator | None) -> LeaseLock | None:
    """The leader Lease in the modes that write to the cluster (plan mode writes files only: the lock suffices)."""
    if actuator is None or not settings.actuators.writes_cluster:
        return None
    from predictor.loop.leader import LeaseLock

    return LeaseLock(
        actuator.api_client,
        name=settings.loop.lease_name,
        namespace=settings.loop.lease_namespace,
        duration_s=settings.loop.lease_duration_s,
    )


def wire_xdp(
    loop: Loop, settings: Settings, actuator: VolcanoActuator | None, source: MetricSource | None = None
) -> None:
    """``loop.xdp.enabled``: publish the XDP agents' inputs each cycle (files; the ConfigMap outside plan mode).

    ``source``: where the nodes' metrics are (a fleet's cluster); default: the top-level Prometheus.
    """
    xdp = settings.loop.xdp
    if not xdp.enabled:
        return
    from predictor.loop.xdp import XdpLoop
    from predictor.loop.xdp_io import ConfigMapPublisher, PrometheusXdpSource

    if source is None:
        from predictor.sources.prometheus import PrometheusSource

        source = PrometheusSource(settings.prometheus)
    publisher = None
    if actuator is not None:
        publisher = ConfigMapPublisher(actuator.api_client, name=xdp.configmap, namespace=xdp.namespace)
    loop.xdp = XdpLoop(xdp, PrometheusXdpSource(source, xdp), publisher=publisher, registry=loop.metrics.registry)


def rca_model(settings: Settings, metrics: LoopMetrics) -> RegistryRca | None:
    """``loop.diagnose.enabled``: the registry's gpu-rca champion, its lifecycle reported on ``metrics``."""
    if not settings.loop.diagnose.enabled:
        return None
    from predictor.loop.rca import RegistryRca
    from predictor.registry import ModelRegistry

    return RegistryRca(ModelRegistry(settings.mlflow), metrics)


def wire_rca(loop: Loop, settings: Settings, model: RegistryRca | None, source: MetricSource | None = None) -> None:
    """Diagnose root causes each cycle with ``model`` (``rca_model``; ``None``: diagnosis is off) on the
    window read from ``source`` (a fleet's cluster; default: the top-level Prometheus)."""
    if model is None:
        return
    from predictor.loop.rca import LoopRca

    if source is None:
        from predictor.sources.prometheus import PrometheusSource

        source = PrometheusSource(settings.prometheus)
    loop.rca = LoopRca(settings.loop.diagnose, source, model, loop.metrics, cluster=loop.name)
