"""A local kubelet pod-resources server: the real v1 proto over gRPC on a Unix socket.

``predictor collect`` asks the kubelet which container holds which GPU; tests answer with this server (the
generated servicer, a real socket) instead of a mocked client, so the wire format and the service name are
what a kubelet speaks.
"""

from __future__ import annotations

import time
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc

from predictor.sources.podresources import api_pb2, api_pb2_grpc

__all__ = ["Assigned", "KubeletPodResources"]


@dataclass
class Assigned:
    """One container's devices of one resource, as the device plugin registered them."""

    namespace: str
    pod: str
    container: str
    resource: str
    device_ids: list[str] = field(default_factory=list)


class _Lister(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(self, server: KubeletPodResources) -> None:
        self.server = server

    def List(self, request: Any, context: Any) -> Any:
        self.server.calls += 1
        time.sleep(self.server.delay_s)
        pods: dict[tuple[str, str], Any] = {}
        for a in self.server.assigned:
            pod = pods.setdefault((a.namespace, a.pod), api_pb2.PodResources(name=a.pod, namespace=a.namespace))
            container = next((c for c in pod.containers if c.name == a.container), None)
            if container is None:
                container = pod.containers.add(name=a.container)
            container.devices.add(resource_name=a.resource, device_ids=a.device_ids)
        return api_pb2.ListPodResourcesResponse(pod_resources=list(pods.values()))

    def GetAllocatableResources(self, request: Any, context: Any) -> Any:
        by_resource: dict[str, list[str]] = {}
        for a in self.server.assigned:
            by_resource.setdefault(a.resource, []).extend(a.device_ids)
        return api_pb2.AllocatableResourcesResponse(
            devices=[api_pb2.ContainerDevices(resource_name=r, device_ids=ids) for r, ids in by_resource.items()]
        )


class KubeletPodResources:
    """``with KubeletPodResources(path, assigned) as kubelet:`` serves ``v1.PodResourcesLister`` on ``path``."""

    def __init__(self, socket_path: Path, assigned: list[Assigned] | None = None, delay_s: float = 0.0) -> None:
        self.socket_path = socket_path
        self.assigned = list(assigned or [])
        self.delay_s = delay_s
        self.calls = 0
        self._server: Any = None

    def __enter__(self) -> KubeletPodResources:
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        api_pb2_grpc.add_PodResourcesListerServicer_to_server(_Lister(self), self._server)
        self._server.add_insecure_port(f"unix://{self.socket_path}")
        self._server.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.stop(grace=None).wait(5)
