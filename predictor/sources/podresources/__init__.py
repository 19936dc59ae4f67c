"""Which pod and container hold each GPU on this node, from the kubelet's pod-resources gRPC API.

NVML knows GPUs, not pods. dcgm-exporter (``--kubernetes``) labels each GPU with the ``namespace``, ``pod``
and ``container`` the kubelet assigned it to, and right-sizing and the queues' "used" GPUs join on those
labels; ``predictor collect`` asks the same socket the same way so its series carry the same labels.

The kubelet lists, per container, device IDs per extended resource: ``nvidia.com/gpu`` gives GPU UUIDs
(or indices, under the device plugin's index strategy), ``nvidia.com/mig-*`` gives MIG device UUIDs.
Time-sliced GPUs are listed as ``<id>::<replica>``; the replica is dropped, so a shared GPU goes to the
first container listed. The gRPC stubs next to this module are generated from ``api.proto``:

    python -m grpc_tools.protoc -I . --python_out=. --grpc_python_out=. --pyi_out=. \\
        predictor/sources/podresources/api.proto

(grpcio-tools 1.85.1: the stubs need protobuf >= 7.35.1 and grpcio >= 1.85.1 at run time). ``grpc`` and
the stubs are imported on first use only, so a node without kubelet access never loads them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_SOCKET", "DeviceOwners", "PodRef", "device_owners"]

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
_GPU_RESOURCE = "nvidia.com/gpu"
_MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
# The kubelet answers from memory; anything slower is a stuck kubelet, and a scrape must not wait on it.
DEFAULT_TIMEOUT_S = 2.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PodRef:
    """The container a device is assigned to."""

    namespace: str
    pod: str
    container: str

    def labels(self) -> dict[str, str]:
        """The labels dcgm-exporter adds in Kubernetes mode."""
        return {"namespace": self.namespace, "pod": self.pod, "container": self.container}


def _is_gpu_resource(name: str) -> bool:
    return name == _GPU_RESOURCE or name.startswith(_MIG_RESOURCE_PREFIX)


def owners_from_response(response: Any) -> dict[str, PodRef]:
    """Device ID → container, from a ``ListPodResourcesResponse`` (first container wins a shared GPU)."""
    owners: dict[str, PodRef] = {}
    for pod in response.pod_resources:
        for container in pod.containers:
            ref = PodRef(pod.namespace, pod.name, container.name)
            for devices in container.devices:
                if not _is_gpu_resource(devices.resource_name):
                    continue
                for device_id in devices.device_ids:
                    owners.setdefault(device_id.split("::", 1)[0], ref)
    return owners


def device_owners(socket_path: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, PodRef]:
    """Ask the kubelet once; raises ``grpc.RpcError`` when it does not answer in ``timeout_s``."""
    import grpc

    from predictor.sources.podresources import api_pb2, api_pb2_grpc

    with grpc.insecure_channel(f"unix://{socket_path}") as channel:
        stub = api_pb2_grpc.PodResourcesListerStub(channel)
        response = stub.List(api_pb2.ListPodResourcesRequest(), timeout=timeout_s)
    return owners_from_response(response)


class DeviceOwners:
    """Device owners read at every call (one local RPC), logging each change of state once, not per scrape.

    No socket means no kubelet access (not mounted, or not a Kubernetes node): GPUs are exported without
    pod labels, which is normal outside Kubernetes, so it is said once at INFO. A socket that does not
    answer is a fault worth a WARNING, again once until it answers.
    """

    def __init__(self, socket_path: str = DEFAULT_SOCKET, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.socket_path = socket_path
        self.timeout_s = timeout_s
        self._state = ""

    def _say(self, state: str, level: int, message: str) -> None:
        if state != self._state:
            log.log(level, message)
            self._state = state

    def __call__(self) -> dict[str, PodRef]:
        if not Path(self.socket_path).exists():
            self._say(
                "missing",
                logging.INFO,
                f"no kubelet pod-resources socket at {self.socket_path}: GPUs are exported without pod labels",
            )
            return {}
        try:
            import grpc
        except ImportError as exc:  # pragma: no cover - grpcio is a dependency
            self._say("no-grpc", logging.WARNING, f"grpc is not installed ({exc}): GPUs have no pod labels")
            return {}
        try:
            owners = device_owners(self.socket_path, self.timeout_s)
        except grpc.RpcError as exc:
            detail = exc.details() if isinstance(exc, grpc.Call) else exc
            self._say(
                "failing",
                logging.WARNING,
                f"kubelet pod-resources at {self.socket_path} did not answer ({detail}): GPUs have no pod labels",
            )
            return {}
        self._say("ok", logging.INFO, f"GPU owners read from the kubelet at {self.socket_path}")
        return owners
