"""What the loop's XDP part reads (network history, GPU pods per node) and where it publishes agent inputs.

Readers: ``PrometheusXdpSource`` (node_exporter and kube-state-metrics through the named queries of
``predictor.sources.queries``) and ``FrameXdpSource`` (frames a caller already holds: the demo's simulated
cluster, tests). Publisher: ``ConfigMapPublisher`` patches the one ConfigMap the node agents mount, by
name; it never creates it (``create`` cannot be limited by ``resourceNames``, so k8s/ ships it empty and
the loop's Role grants only get and patch on that name).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd

from models.frames import TIME, VALUE
from predictor.config import XdpLoopSettings
from predictor.errors import ActuatorError, TemporaryActuatorError
from predictor.sources.queries import NODE_GPU_ALLOCATABLE, RUNNING_GPU_PODS, node_network_bps

if TYPE_CHECKING:
    from kubernetes import client

    from predictor.sources import MetricSource

__all__ = [
    "NETWORK_COLUMNS",
    "POD_COLUMNS",
    "ConfigMapPublisher",
    "FrameXdpSource",
    "PrometheusXdpSource",
    "XdpPublisher",
    "XdpSource",
]

NETWORK_COLUMNS = ["node", "device", "direction", TIME, VALUE]  # VALUE: bits per second over the hour
POD_COLUMNS = ["node", "namespace", "pod", "job", "queue", "gpus"]


class XdpSource(Protocol):
    def network(self, now: pd.Timestamp) -> pd.DataFrame:
        """Hourly bits per second per node, device and direction (receive|transmit) up to ``now``."""
        ...

    def pods(self, now: pd.Timestamp) -> pd.DataFrame:
        """Running GPU pods at ``now``: node, namespace, pod, Volcano job and queue, GPUs requested."""
        ...

    def node_gpus(self, now: pd.Timestamp) -> dict[str, float]:
        """Allocatable GPUs per node at ``now``."""
        ...


class XdpPublisher(Protocol):
    def publish(self, documents: Mapping[str, str], *, dry_run: bool) -> str:
        """Make ``documents`` (key → text) the agents' inputs; keys not in it are removed. Returns a summary."""
        ...


def _instant(source: MetricSource, query: str, now: pd.Timestamp) -> pd.DataFrame:
    # The MetricSource contract is range queries; one step at ``now`` is the instant value.
    return source.query_range(query, now, now, pd.Timedelta(minutes=1))


class PrometheusXdpSource:
    """node_exporter network counters and kube-state-metrics pods from Prometheus."""

    def __init__(self, source: MetricSource, settings: XdpLoopSettings) -> None:
        self.source, self.settings = source, settings

    def network(self, now: pd.Timestamp) -> pd.DataFrame:
        s = self.settings
        end = now.floor("h")
        start = end - pd.Timedelta(hours=s.lookback_h)
        frames = []
        for direction in ("receive", "transmit"):
            query = node_network_bps(direction, node_label=s.node_label, exclude_devices=s.exclude_devices)
            frame = self.source.query_range(query, start, end, pd.Timedelta(hours=1))
            if frame.empty or s.node_label not in frame.columns:
                continue
            frames.append(
                pd.DataFrame(
                    {
                        "node": frame[s.node_label].astype(str),
                        "device": frame["device"].astype(str),
                        "direction": direction,
                        TIME: frame[TIME],
                        VALUE: frame[VALUE],
                    }
                )
            )
        if not frames:
            return pd.DataFrame(columns=NETWORK_COLUMNS)
        return pd.concat(frames, ignore_index=True)

    def pods(self, now: pd.Timestamp) -> pd.DataFrame:
        frame = _instant(self.source, RUNNING_GPU_PODS, now)
        if frame.empty:
            return pd.DataFrame(columns=POD_COLUMNS)

        def get(name: str) -> pd.Series:
            return frame[name].astype(str) if name in frame.columns else pd.Series("", index=frame.index)

        return pd.DataFrame(
            {
                "node": get("node"),
                "namespace": get("namespace"),
                "pod": get("pod"),
                "job": get("label_volcano_sh_job_name"),
                "queue": get("label_volcano_sh_queue_name"),
                "gpus": frame[VALUE].astype(float),
            }
        )

    def node_gpus(self, now: pd.Timestamp) -> dict[str, float]:
        frame = _instant(self.source, NODE_GPU_ALLOCATABLE, now)
        if frame.empty or "node" not in frame.columns:
            return {}
        return {str(n): float(v) for n, v in zip(frame["node"], frame[VALUE], strict=True)}


class FrameXdpSource:
    """Frames already in memory (the demo's simulated cluster, tests), cut at ``now``."""

    def __init__(self, network: pd.DataFrame, pods: pd.DataFrame, node_gpus: Mapping[str, float]) -> None:
        self._network, self._pods, self._gpus = network, pods, dict(node_gpus)

    def network(self, now: pd.Timestamp) -> pd.DataFrame:
        return self._network.loc[self._network[TIME] <= now].reset_index(drop=True)

    def pods(self, now: pd.Timestamp) -> pd.DataFrame:
        return self._pods

    def node_gpus(self, now: pd.Timestamp) -> dict[str, float]:
        return self._gpus


class ConfigMapPublisher:
    """One JSON merge patch of ``data`` on the agents' ConfigMap: every node's key at once (one write)."""

    def __init__(self, api_client: client.ApiClient, *, name: str, namespace: str, timeout_s: float = 10.0) -> None:
        from kubernetes import client as k8s

        self.api = k8s.CoreV1Api(api_client)
        self.name, self.namespace, self.timeout_s = name, namespace, timeout_s

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        import urllib3
        from kubernetes.client.exceptions import ApiException

        where = f"ConfigMap {self.namespace}/{self.name}"
        try:
            return fn(*args, _request_timeout=self.timeout_s, **kwargs)
        except ApiException as exc:
            hint = " (k8s/ ships it; the loop may not create it)" if exc.status == 404 else ""
            error = TemporaryActuatorError if exc.status in (409, 429) or (exc.status or 0) >= 500 else ActuatorError
            raise error(f"{what} {where}: HTTP {exc.status} {exc.reason}{hint}") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TemporaryActuatorError(f"{what} {where}: {type(exc).__name__}: {exc}".splitlines()[0]) from exc

    def publish(self, documents: Mapping[str, str], *, dry_run: bool) -> str:
        live = self._call("get", self.api.read_namespaced_config_map, self.name, self.namespace)
        gone = sorted(set((live.data or {}) if live is not None else {}) - set(documents))
        # Merge patch: null deletes a key, so a node this cycle has no inputs for (gone, or its network
        # series missing) loses them, and its agent, if any, holds (inputs unreadable).
        body = {"data": {**dict.fromkeys(gone), **documents}}
        self._call(
            "patch",
            self.api.patch_namespaced_config_map,
            self.name,
            self.namespace,
            body,
            dry_run="All" if dry_run else None,
            field_manager="gpu-capacity-predictor",
            _content_type="application/merge-patch+json",
        )
        verb = "validated (dryRun=All)" if dry_run else "patched"
        return f"{verb} {self.namespace}/{self.name}: {len(documents)} nodes, {len(gone)} removed"
