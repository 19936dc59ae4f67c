"""Where the per-chunk work of a training job runs: in this process, in local processes, or as Ray tasks.

Why one small seam: the pipelines split their work into chunks (``models.forecast.chunked.chunk_series``)
and map one top-level function over them; only *where* that map runs changes. The same chunks and the same
function run in every executor, so a serial run and a Ray run produce the same models and metrics. Workers
only compute: they get a chunk and return plain results; the driver alone talks to MLflow.

The executor is chosen once per command (``predictor retrain --ray ADDRESS`` / ``--processes N``) and
reaches the pipelines through ``use_executor`` (a context variable), so the per-family ``train`` commands
need no new parameter. Ray is an optional extra, imported only when a Ray executor is made.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextvars import ContextVar
from multiprocessing import get_context
from typing import Any, Protocol, TypeVar

from models.forecast.parallel import one_thread_each
from predictor.errors import InputError

__all__ = [
    "Executor",
    "ProcessExecutor",
    "RayExecutor",
    "SerialExecutor",
    "current_executor",
    "make_executor",
    "use_executor",
]

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    """Maps a picklable top-level function over items; results come back in the items' order."""

    name: str

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]: ...

    def close(self) -> None: ...


class SerialExecutor:
    """Every chunk in this process, one after the other (the default: what training always did)."""

    name = "serial"

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        return [fn(item) for item in items]

    def close(self) -> None:
        return None


class ProcessExecutor:
    """Chunks in ``workers`` local processes (spawned: forking a process that loaded torch is not safe)."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise InputError(f"--processes must be at least 1, got {workers}")
        self.workers = workers
        self.name = f"{workers} local processes"
        self._pool: ProcessPoolExecutor | None = None

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        if len(items) <= 1:
            return [fn(item) for item in items]
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, mp_context=get_context("spawn"), initializer=one_thread_each)
        return list(self._pool.map(fn, items))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


class RayExecutor:
    """Chunks as Ray tasks on the cluster at ``address`` (``auto``: the one this machine runs; ``local``: a new
    single-machine cluster that ends with this process, for benches and trials).

    Connecting fails with one line naming the address when Ray is missing or the cluster cannot be reached.
    """

    def __init__(self, address: str, *, connect_timeout_s: float = 10.0) -> None:
        try:
            import ray
        except ImportError as exc:
            raise InputError(
                "--ray needs Ray, which is not installed: pip install 'gpu-capacity-predictor[ray]'"
            ) from exc
        self._ray: Any = ray
        self.name = f"Ray at {address}"
        _check_reachable(address, connect_timeout_s)
        try:
            extra: dict[str, Any] = {"include_dashboard": False} if address == "local" else {}
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False, **extra)
        except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError... all mean "not there"
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"--ray {address}: cannot connect to a Ray cluster: {first}") from exc
        self._remotes: dict[Any, Any] = {}

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        remote = self._remotes.get(fn)
        if remote is None:
            remote = self._remotes[fn] = self._ray.remote(num_cpus=1, max_retries=1)(fn)
        return list(self._ray.get([remote.remote(item) for item in items]))

    def close(self) -> None:
        self._ray.shutdown()


def _check_reachable(address: str, timeout_s: float) -> None:
    """Fail in seconds, naming the address, where Ray itself would retry an unreachable one for minutes."""
    if address in ("auto", "local"):
        return  # auto: Ray finds this machine's cluster from its own files; local: Ray starts a throwaway one
    hostport = address.removeprefix("ray://").rsplit("/", 1)[0]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise InputError(f"--ray {address}: not an address (host:port, ray://host:port, auto or local)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise InputError(f"--ray {address}: cannot reach a Ray cluster there: {exc.strerror or exc}") from exc


_CURRENT: ContextVar[Executor | None] = ContextVar("pipelines_executor", default=None)


def current_executor() -> Executor:
    """The executor chosen for this command, serial when none was."""
    return _CURRENT.get() or SerialExecutor()


def make_executor(ray: str | None = None, processes: int | None = None) -> Executor:
    """The executor for ``--ray ADDRESS`` or ``--processes N`` (not both); serial for neither."""
    if ray is not None and processes is not None:
        raise InputError("give --ray or --processes, not both")
    if ray is not None:
        if not ray.strip():
            raise InputError("--ray needs an address (host:port, ray://host:port, auto or local)")
        return RayExecutor(ray.strip())
    if processes is not None:
        return ProcessExecutor(processes)
    return SerialExecutor()


@contextlib.contextmanager
def use_executor(executor: Executor) -> Iterator[Executor]:
    """Run the pipelines inside with ``executor``; it is closed on the way out, also on failure."""
    token = _CURRENT.set(executor)
    try:
        yield executor
    finally:
        _CURRENT.reset(token)
        executor.close()
