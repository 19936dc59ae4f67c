"""One loop at a time: a local file lock on the loop's state, and a Kubernetes Lease in the modes that write.

Two loops on one audit log wrote two ``cycle-done`` records for one slot and doubled the planned changes;
two loops against one cluster each kept their own cooldowns and max steps, so together they moved a queue
twice as far. So a loop acts only while it holds:

* ``FileLock``: an exclusive ``fcntl.flock`` on ``<audit log>.lock``, in every mode. It guards the audit log
  and the state file against a second process on the same volume (a ``loop --once`` next to the running
  loop). The kernel drops it when the process dies, so a crash never leaves it stale.
* ``LeaseLock``: a ``coordination.k8s.io/v1`` Lease (``holderIdentity``, ``leaseDurationSeconds``,
  ``renewTime``) in ``apply`` and ``server-dry-run`` modes, for two pods (a partitioned node, a rollout
  gone wrong). The holder renews it each cycle and while it waits; another instance takes it only once
  ``renewTime + leaseDurationSeconds`` has passed. Every write carries the Lease's resourceVersion, so
  two instances racing for an expired Lease cannot both win (the loser gets 409).

An instance that does not hold both stands by: it writes nothing, says so in one line, and tries again
at its next cycle. Time comes from the loop's injected clock, so tests expire a Lease without waiting.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import socket
from pathlib import Path
from typing import Any, Protocol

import pandas as pd
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from predictor.errors import ActuatorError

__all__ = ["FileLock", "Leader", "LeaseLock", "default_identity"]


class Leader(Protocol):
    """Who may act: ``acquire`` returns ``""`` when this instance holds the lock, else why not."""

    def acquire(self, now: pd.Timestamp) -> str: ...

    def release(self) -> None: ...


def default_identity() -> str:
    """This instance's holder identity: the pod name (``$POD_NAME``), else host name, pid and a nonce.

    The pod name alone, so a container restarted in the same pod (a crash, an OOM kill) takes its own
    Lease back at once instead of waiting for it to expire; two processes inside one pod share its volume,
    where the ``FileLock`` keeps them apart.
    """
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class FileLock:
    """An exclusive, non-blocking ``flock`` on ``path``, held from the first ``acquire`` until ``release``."""

    def __init__(self, path: Path, identity: str | None = None) -> None:
        self.path, self.identity = path, identity or default_identity()
        self._fd: int | None = None

    def acquire(self, now: pd.Timestamp) -> str:
        if self._fd is not None:
            return ""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ActuatorError(f"cannot open the loop lock {self.path}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            return f"another loop ({holder}) holds {self.path}"
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{self.identity} since {now.isoformat()}\n".encode(), 0)
        self._fd = fd
        return ""

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


class LeaseLock:
    """A ``coordination.k8s.io/v1`` Lease held by ``identity`` (create, renew, take over once expired)."""

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        name: str,
        namespace: str,
        duration_s: float,
        identity: str | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self.api = client.CoordinationV1Api(api_client)
        self.name, self.namespace, self.duration_s = name, namespace, duration_s
        self.identity, self.timeout_s = identity or default_identity(), timeout_s
        self.held = False

    def _spec(self, now: pd.Timestamp, previous: Any | None) -> client.V1LeaseSpec:
        ours = previous is not None and previous.holder_identity == self.identity
        transitions = int(getattr(previous, "lease_transitions", 0) or 0) + (0 if ours or previous is None else 1)
        acquired = (
            previous.acquire_time if ours and previous is not None and previous.acquire_time else now.to_pydatetime()
        )
        return client.V1LeaseSpec(
            holder_identity=self.identity,
            lease_duration_seconds=max(1, round(self.duration_s)),
            acquire_time=acquired,
            renew_time=now.to_pydatetime(),
            lease_transitions=transitions,
        )

    def acquire(self, now: pd.Timestamp) -> str:
        where = f"Lease {self.namespace}/{self.name}"
        try:
            try:
                lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.timeout_s)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                body = client.V1Lease(
                    metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace), spec=self._spec(now, None)
                )
                self.api.create_namespaced_lease(self.namespace, body, _request_timeout=self.timeout_s)
                self.held = True
                return ""
            spec = lease.spec or client.V1LeaseSpec()
            holder = spec.holder_identity
            if holder and holder != self.identity and spec.renew_time is not None:
                until = pd.Timestamp(spec.renew_time) + pd.Timedelta(seconds=spec.lease_duration_seconds or 0)
                if until > now:
                    self.held = False
                    return f"another loop ({holder}) holds {where} until {until.isoformat()}"
            lease.spec = self._spec(now, spec)
            self.api.replace_namespaced_lease(self.name, self.namespace, lease, _request_timeout=self.timeout_s)
        except ApiException as exc:
            self.held = False
            if exc.status == 409:
                return f"another loop took {where} first"
            return f"cannot read or renew {where}: HTTP {exc.status} {exc.reason or ''}".strip()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self.held = False
            return f"cannot read or renew {where}: {type(exc).__name__}"
        self.held = True
        return ""

    def release(self) -> None:
        """Give the Lease up (empty holder) so a successor need not wait for it to expire; best effort."""
        if not self.held:
            return
        self.held = False
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.timeout_s)
            if lease.spec is not None and lease.spec.holder_identity == self.identity:
                lease.spec.holder_identity = None
                self.api.replace_namespaced_lease(self.name, self.namespace, lease, _request_timeout=self.timeout_s)
        except (ApiException, urllib3.exceptions.HTTPError, OSError):
            pass  # it expires on its own after leaseDurationSeconds
