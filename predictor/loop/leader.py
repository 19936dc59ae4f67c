"""One loop at a time: a local file lock on the loop's state, and a Kubernetes Lease in the modes that write.

Two loops on one audit log wrote two ``cycle-done`` records for one slot and doubled the planned changes;
two loops against one cluster each kept their own cooldowns and max steps, so together they moved a queue
twice as far. So a loop acts only while it holds:

* ``FileLock``: an exclusive ``fcntl.flock`` on ``<audit log>.lock``, in every mode. It guards the audit log
  and the state file against a second process on the same volume (a ``loop --once`` next to the running
  loop). The kernel drops it when the process dies, so a crash never leaves it stale.
* ``LeaseLock``: a ``coordination.k8s.io/v1`` Lease (``holderIdentity``, ``leaseDurationSeconds``,
  ``renewTime``) in ``apply`` and ``server-dry-run`` modes, for two pods (a partitioned node, a rollout
  gone wrong). The holder renews it each cycle and while it waits; another instance takes it only once the
  record has not changed for ``leaseDurationSeconds`` *of its own clock*, as client-go's leader election
  does. Comparing the holder's ``renewTime`` with the local clock would let a standby whose clock runs a
  minute ahead take a Lease that is being renewed (two loops applied in one slot that way). Every write
  carries the Lease's resourceVersion, so two instances racing for an expired Lease cannot both win (the
  loser gets 409).

Between the patches of one apply the holder checks that it still holds (``check``): the Lease still names it
and its own last renewal is younger than the duration, so a cycle that outlived its Lease stops writing.

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

    def check(self, now: pd.Timestamp) -> str:
        """``""`` while this instance still holds what ``acquire`` took (between the writes of one apply)."""
        ...

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

    def check(self, now: pd.Timestamp) -> str:
        return "" if self._fd is not None else f"the loop lock {self.path} is not held"

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
        # What this instance last saw of another holder's record, and when by its own clock: expiry is judged
        # on that local time, never on the other pod's renewTime (client-go's observedRecord/observedTime).
        self._observed: tuple[object, ...] | None = None
        self._observed_at: pd.Timestamp | None = None
        self._renewed_at: pd.Timestamp | None = None  # our own last successful write, on our clock

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
                self.held, self._renewed_at = True, now
                return ""
            spec = lease.spec or client.V1LeaseSpec()
            holder = spec.holder_identity
            if holder and holder != self.identity:
                record = (holder, spec.renew_time, spec.acquire_time, spec.lease_transitions, _version(lease))
                if record != self._observed or self._observed_at is None:
                    self._observed, self._observed_at = record, now
                until = self._observed_at + pd.Timedelta(seconds=spec.lease_duration_seconds or self.duration_s)
                if until > now:
                    self.held = False
                    return f"another loop ({holder}) holds {where} (unchanged since {self._observed_at.isoformat()})"
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
        self.held, self._renewed_at = True, now
        self._observed = self._observed_at = None
        return ""

    def check(self, now: pd.Timestamp) -> str:
        """Still ours: renewed by us less than a duration ago (our clock) and the Lease still names us."""
        where = f"Lease {self.namespace}/{self.name}"
        if not self.held or self._renewed_at is None:
            return f"{where} is not held"
        if now - self._renewed_at >= pd.Timedelta(seconds=self.duration_s):
            self.held = False
            return f"{where} was last renewed at {self._renewed_at.isoformat()}, a lease duration ago"
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.timeout_s)
        except ApiException as exc:
            return f"cannot read {where}: HTTP {exc.status} {exc.reason or ''}".strip()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            return f"cannot read {where}: {type(exc).__name__}"
        holder = lease.spec.holder_identity if lease.spec is not None else None
        if holder != self.identity:
            self.held = False
            return f"another loop ({holder or 'nobody'}) holds {where} now"
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


def _version(lease: Any) -> object:
    metadata = getattr(lease, "metadata", None)
    return getattr(metadata, "resource_version", None)
