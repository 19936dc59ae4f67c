"""A fake Kubernetes API server for Volcano Queues, served over real HTTP on 127.0.0.1.

No kube-apiserver (or envtest) can be installed here, so the actuator's tests point the real
``kubernetes`` client at this server instead of mocking the client. It serves cluster-scoped
``queues.scheduling.volcano.sh/v1beta1`` with status, applies JSON merge patches with resourceVersion
checks (409), enforces the Volcano validating webhook's quota rule (422), honours ``dryRun=All``, and
records every request. It also serves ``coordination.k8s.io/v1`` Leases (get, create, update with
resourceVersion checks: 404, 409 AlreadyExists, 409 Conflict) for the loop's leader election.
Faults are scripted per request: a status code, a delay (timeouts) or a hook that edits a queue just
before a patch lands (a concurrent writer).
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from predictor.planner import apply_merge_patch, parse_quantity

PREFIX = "/apis/scheduling.volcano.sh/v1beta1/queues"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/"


@dataclass
class Fault:
    """What to do to the next matching request instead of (or before) serving it."""

    method: str = "PATCH"
    status: int | None = None  # answer with this code
    delay_s: float = 0.0  # sleep first (longer than the client's timeout = a timeout)
    hook: Callable[[FakeApiServer], None] | None = None  # e.g. a concurrent edit
    after: int = 0  # let this many matching requests through first


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    content_type: str
    body: Any


@dataclass
class FakeApiServer:
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=lambda: [node_object(f"node-{i}") for i in range(12)])
    url: str = ""
    writes: int = 0  # patches that took effect
    leases: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (namespace, name) → Lease
    _version: int = 100
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, obj: dict[str, Any]) -> None:
        obj = copy.deepcopy(obj)
        obj.setdefault("apiVersion", "scheduling.volcano.sh/v1beta1")
        obj.setdefault("kind", "Queue")
        self._version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._version)
        self.queues[obj["metadata"]["name"]] = obj

    def edit(self, name: str, mutate: Callable[[dict[str, Any]], None]) -> None:
        """Change a queue as another writer would (bumps its resourceVersion)."""
        mutate(self.queues[name])
        self._version += 1
        self.queues[name]["metadata"]["resourceVersion"] = str(self._version)

    def patches(self, *, dry_run: bool | None = None) -> list[Request]:
        out = [r for r in self.requests if r.method == "PATCH"]
        if dry_run is not None:
            out = [r for r in out if ("All" in r.query.get("dryRun", [])) == dry_run]
        return out

    # -- request handling (called from the HTTP thread) ---------------------------------------------
    def handle(self, method: str, path: str, query: dict[str, list[str]], ctype: str, body: Any) -> tuple[int, Any]:
        with self._lock:
            self.requests.append(Request(method, path, query, ctype, body))
            fault = next((f for f in self.faults if f.method == method), None)
            if fault is not None and fault.after > 0:
                fault.after -= 1
                fault = None
            elif fault is not None:
                self.faults.remove(fault)
        if fault is not None:
            if fault.delay_s:
                time.sleep(fault.delay_s)
            if fault.hook is not None:
                fault.hook(self)
            if fault.status is not None:
                return fault.status, _status(fault.status, "injected fault")
        with self._lock:
            return self._serve(method, path, query, ctype, body)

    def _serve(self, method: str, path: str, query: dict[str, list[str]], ctype: str, body: Any) -> tuple[int, Any]:
        if path.startswith(LEASES):
            return self._lease(method, path[len(LEASES) :].strip("/").split("/"), body)
        if path.rstrip("/") == "/api/v1/nodes" and method == "GET":
            return 200, {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": copy.deepcopy(self.nodes)}
        if path.rstrip("/") == PREFIX and method == "GET":
            return 200, {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "QueueList",
                "metadata": {"resourceVersion": str(self._version)},
                "items": [copy.deepcopy(q) for q in self.queues.values()],
            }
        if not path.startswith(PREFIX + "/"):
            return 404, _status(404, f"no route {path}")
        name = path[len(PREFIX) + 1 :]
        if name not in self.queues:
            return 404, _status(404, f'queues.scheduling.volcano.sh "{name}" not found')
        if method == "GET":
            return 200, copy.deepcopy(self.queues[name])
        if method != "PATCH":
            return 405, _status(405, "method not allowed")
        if ctype != "application/merge-patch+json":
            return 415, _status(415, f"unsupported patch type {ctype}")
        live = self.queues[name]
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != live["metadata"]["resourceVersion"]:
            return 409, _status(
                409,
                f'Operation cannot be fulfilled on queues.scheduling.volcano.sh "{name}": '
                "the object has been modified; please apply your changes to the latest version",
            )
        patch = copy.deepcopy(body)
        patch.pop("status", None)  # status is a subresource: a patch of the main resource ignores it
        (patch.get("metadata") or {}).pop("resourceVersion", None)
        updated = apply_merge_patch(live, patch)
        problem = webhook_problem(updated)
        if problem:
            return 422, _status(422, f'admission webhook "validatequeue.volcano.sh" denied the request: {problem}')
        if "All" in query.get("dryRun", []):
            return 200, updated
        self._version += 1
        self.writes += 1
        updated["metadata"]["resourceVersion"] = str(self._version)
        self.queues[name] = updated
        return 200, copy.deepcopy(updated)

    def _lease(self, method: str, parts: list[str], body: Any) -> tuple[int, Any]:
        """``namespaces/<ns>/leases[/<name>]``: GET, POST (create), PUT (update, resourceVersion checked)."""
        if len(parts) < 2 or parts[1] != "leases":
            return 404, _status(404, "no route")
        namespace = parts[0]
        if len(parts) == 2 and method == "POST":
            key = (namespace, str(body["metadata"]["name"]))
            if key in self.leases:
                return 409, _status(409, f'leases.coordination.k8s.io "{key[1]}" already exists')
            return 201, self._store_lease(key, body)
        if len(parts) != 3:
            return 405, _status(405, "method not allowed")
        key = (namespace, parts[2])
        if key not in self.leases:
            return 404, _status(404, f'leases.coordination.k8s.io "{key[1]}" not found')
        if method == "GET":
            return 200, copy.deepcopy(self.leases[key])
        if method != "PUT":
            return 405, _status(405, "method not allowed")
        if (body.get("metadata") or {}).get("resourceVersion") != self.leases[key]["metadata"]["resourceVersion"]:
            return 409, _status(
                409,
                f'Operation cannot be fulfilled on leases.coordination.k8s.io "{key[1]}": the object has been modified',
            )
        return 200, self._store_lease(key, body)

    def _store_lease(self, key: tuple[str, str], body: dict[str, Any]) -> dict[str, Any]:
        lease = copy.deepcopy(body)
        lease.update(apiVersion="coordination.k8s.io/v1", kind="Lease")
        self._version += 1
        lease["metadata"].update(name=key[1], namespace=key[0], resourceVersion=str(self._version))
        self.leases[key] = lease
        return copy.deepcopy(lease)


def webhook_problem(queue: dict[str, Any]) -> str:
    """Volcano's ``validateResourceQuantityOfQueue``: guarantee ≤ deserved ≤ capability per resource."""
    spec = queue.get("spec") or {}
    deserved = spec.get("deserved") or {}
    capability = spec.get("capability") or {}
    for r, g in ((spec.get("guarantee") or {}).get("resource") or {}).items():
        if r not in deserved or parse_quantity(g, what=r) > parse_quantity(deserved[r], what=r):
            return f"deserved[{r}] must be >= guarantee[{r}]"
    for r, d in deserved.items():
        if r in capability and parse_quantity(d, what=r) > parse_quantity(capability[r], what=r):
            return f"capability[{r}] must be >= deserved[{r}]"
    return ""


def _status(code: int, message: str) -> dict[str, Any]:
    reasons = {404: "NotFound", 409: "Conflict", 422: "Invalid", 500: "InternalError", 503: "ServiceUnavailable"}
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reasons.get(code, "Unknown"),
        "code": code,
    }


def _handler(server: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _go(self) -> None:
            url = urlparse(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            code, payload = server.handle(
                self.command, url.path, parse_qs(url.query), self.headers.get("Content-Type", ""), body
            )
            data = json.dumps(payload).encode()
            try:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and went away

        do_GET = do_PATCH = do_PUT = do_POST = _go  # noqa: N815 (http.server dispatches on these names)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def serve(fake: FakeApiServer | None = None) -> Iterator[FakeApiServer]:
    """Run ``fake`` on a free 127.0.0.1 port for the duration of the block."""
    fake = fake or FakeApiServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    httpd.daemon_threads = True
    fake.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def queue_object(
    name: str,
    *,
    deserved: float,
    capability: float,
    guarantee: float = 0.0,
    allocated: float = 0.0,
    parent: str | None = None,
    managed: bool = True,
    weight: int = 1,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Queue as ``kubectl get queues -o json`` shows it (quantities as strings, status.allocated set)."""
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = dict(annotations)
    if not managed:
        meta["annotations"] = {**meta.get("annotations", {}), "gpu-capacity-predictor/managed": "false"}
    spec: dict[str, Any] = {
        "weight": weight,
        "reclaimable": True,
        "deserved": {"nvidia.com/gpu": f"{deserved:g}", "cpu": "256", "memory": "2Ti"},
        "capability": {"nvidia.com/gpu": f"{capability:g}"},
        "guarantee": {"resource": {"nvidia.com/gpu": f"{guarantee:g}"}},
    }
    if parent:
        spec["parent"] = parent
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": meta,
        "spec": spec,
        "status": {"state": "Open", "allocated": {"nvidia.com/gpu": f"{allocated:g}"}, "running": 1},
    }


def node_object(name: str, gpus: int = 8, *, ready: bool = True) -> dict[str, Any]:
    """A Node with allocatable GPUs and a Ready condition."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "96"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


@contextmanager
def serve_team_queues() -> Iterator[FakeApiServer]:
    """A fake API server holding the queues the actuator and loop tests plan: team-a, team-b, default."""
    with serve() as server:
        server.add(queue_object("team-a", deserved=16, capability=32, guarantee=4, allocated=10))
        server.add(queue_object("team-b", deserved=40, capability=48, guarantee=8, allocated=12))
        server.add(queue_object("default", deserved=1, capability=1))
        yield server
