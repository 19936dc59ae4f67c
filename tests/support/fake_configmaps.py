"""The fake API server (``tests.actuators.fake_apiserver``) plus core/v1 ConfigMaps: get and patch only.

That is all the loop's Role allows on the XDP agents' inputs ConfigMap (by name; never create), so a
patch to a ConfigMap that does not exist is a 404 here as on a real server. JSON merge patches honour
``dryRun=All``; every request is recorded by the base class.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from predictor.planner import apply_merge_patch
from tests.actuators.fake_apiserver import FakeApiServer

__all__ = ["FakeApiServerWithConfigMaps"]

CORE = "/api/v1/namespaces/"


@dataclass
class FakeApiServerWithConfigMaps(FakeApiServer):
    configmaps: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (namespace, name) → object
    configmap_writes: int = 0

    def add_configmap(self, namespace: str, name: str, data: dict[str, str] | None = None) -> None:
        self._version += 1
        self.configmaps[(namespace, name)] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "data": dict(data or {}),
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(self._version)},
        }

    def _serve(self, method: str, path: str, query: dict[str, list[str]], ctype: str, body: Any) -> tuple[int, Any]:
        parts = path[len(CORE) :].strip("/").split("/") if path.startswith(CORE) else []
        if len(parts) < 2 or parts[1] != "configmaps":
            return super()._serve(method, path, query, ctype, body)
        if len(parts) != 3:
            return 405, _status(405, "only get and patch by name")
        key = (parts[0], parts[2])
        if key not in self.configmaps:
            return 404, _status(404, f'configmaps "{key[1]}" not found')
        if method == "GET":
            return 200, copy.deepcopy(self.configmaps[key])
        if method != "PATCH":
            return 405, _status(405, "method not allowed")
        if ctype != "application/merge-patch+json":
            return 415, _status(415, f"unsupported patch type {ctype}")
        updated = apply_merge_patch(self.configmaps[key], body)
        if "All" in query.get("dryRun", []):
            return 200, updated
        self._version += 1
        self.configmap_writes += 1
        updated["metadata"]["resourceVersion"] = str(self._version)
        self.configmaps[key] = updated
        return 200, copy.deepcopy(updated)


def _status(code: int, message: str) -> dict[str, Any]:
    reasons = {404: "NotFound", 405: "MethodNotAllowed", 415: "UnsupportedMediaType"}
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reasons.get(code, "Unknown"),
        "code": code,
    }
