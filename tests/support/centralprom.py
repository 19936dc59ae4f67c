"""A real central store for tests: two cluster Prometheus servers remote-writing into a third.

Each cluster server runs with ``global.external_labels: {cluster: <name>}`` and ``remote_write`` to a
central Prometheus started with ``--web.enable-remote-write-receiver``; the test's history reaches each
cluster server and is forwarded from its WAL, as a cluster's live samples would be. What Prometheus 2.42
does that decided how the history gets in (measured; docs/design.md "Fleet"):

- Remote write forwards only samples newer than the sender's start (its WAL watcher skips older ones) and
  never forwards blocks made by ``promtool`` backfill; a history scraped with timestamps in the past is
  stored by the cluster server but never reaches the central one.
- A scrape refuses samples more than 10 minutes ahead of the wall clock ("too far into the future"), so a
  scrape cannot carry days of history either: the history lies in the (near) future and is pushed into
  each cluster server over its own remote-write receiver (``push``), from where it is forwarded.
- The head accepts a sample only within half a block range of its newest one: the block range is set far
  above the history (``--storage.tsdb.min-block-duration``), which also keeps compaction out of the test.

Needs the ``prometheus`` binary (Debian package ``prometheus``).
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

import requests

from predictor.errors import EnvironmentUnsupportedError
from predictor.names import LABEL_NAME
from tests.support.localprom import free_port, stop_process, wait_ready

__all__ = ["CentralStore", "Series", "openmetrics_series", "push"]

# Block range far above any test history: keeps every sample appendable (see the module docstring).
_BLOCK = "60d"
_LABEL = re.compile(rf'({LABEL_NAME})="((?:[^"\\]|\\.)*)"')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}

# One series: its labels (``__name__`` included) and its samples ``(unix_ms, value)`` in time order.
Series = tuple[dict[str, str], list[tuple[int, float]]]


def openmetrics_series(path: Path) -> list[Series]:
    """The series of an OpenMetrics file (as the simulator writes it), samples in time order."""
    by_head: dict[str, Series] = {}
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if not line.strip() or line.startswith("#"):
                continue
            head, value, stamp = line.rstrip("\n").rsplit(" ", 2)
            if head not in by_head:
                name, _, rest = head.partition("{")
                labels = {
                    k: re.sub(r"\\.", lambda m: _UNESCAPE.get(m.group(), m.group()), v) for k, v in _LABEL.findall(rest)
                }
                by_head[head] = ({"__name__": name, **labels}, [])
            by_head[head][1].append((int(float(stamp) * 1000), float(value)))
    return [(labels, sorted(samples)) for labels, samples in by_head.values()]


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _write_request(series: Iterable[Series]) -> bytes:
    """A remote-write ``WriteRequest`` protobuf (prometheus/prompb), encoded by hand: no generated code needed."""
    out = bytearray()
    for labels, samples in series:
        body = b"".join(_field(1, _field(1, k.encode()) + _field(2, v.encode())) for k, v in sorted(labels.items()))
        body += b"".join(_field(2, b"\x09" + struct.pack("<d", v) + b"\x10" + _varint(t)) for t, v in samples)
        out += _field(1, body)
    return bytes(out)


def _snappy_literal(data: bytes) -> bytes:
    """Snappy block format with literals only: valid input for any snappy decoder, no compression library."""
    out = bytearray(_varint(len(data)))
    for at in range(0, len(data), 65536):
        chunk = data[at : at + 65536]
        n = len(chunk) - 1
        if n < 60:
            out += bytes([n << 2])
        else:
            out += bytes([60 << 2, n]) if n < 256 else bytes([61 << 2]) + n.to_bytes(2, "little")
        out += chunk
    return bytes(out)


def push(url: str, series: Sequence[Series], *, batch: int = 500) -> None:
    """Write ``series`` to a Prometheus remote-write receiver at ``url`` (``/api/v1/write`` is appended)."""
    headers = {
        "Content-Encoding": "snappy",
        "Content-Type": "application/x-protobuf",
        "X-Prometheus-Remote-Write-Version": "0.1.0",
    }
    for at in range(0, len(series), batch):
        body = _snappy_literal(_write_request(series[at : at + batch]))
        answer = requests.post(f"{url}/api/v1/write", data=body, headers=headers, timeout=60)
        if answer.status_code // 100 != 2:
            raise EnvironmentUnsupportedError(f"{url} refused remote write: {answer.status_code} {answer.text[:200]}")


class _Server:
    """One ``prometheus`` process on a free loopback port with its own config and TSDB under ``workdir``."""

    def __init__(self, workdir: Path, name: str, config: str, *extra: str) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise EnvironmentUnsupportedError("prometheus not found on PATH (install the Debian package 'prometheus')")
        self.port, self.name = free_port(), name
        (workdir / f"{name}.yml").write_text(config, encoding="utf-8")
        self.log = workdir / f"{name}.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    binary,
                    f"--config.file={workdir / f'{name}.yml'}",
                    f"--storage.tsdb.path={workdir / name}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    f"--storage.tsdb.min-block-duration={_BLOCK}",
                    f"--storage.tsdb.max-block-duration={_BLOCK}",
                    "--storage.tsdb.retention.time=100y",
                    "--log.level=warn",
                    *extra,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, deadline: float) -> None:
        wait_ready(self.process, self.url, deadline, f"prometheus {self.name} (log: {self.log})")

    def stop(self) -> None:
        stop_process(self.process)


class CentralStore:
    """``with CentralStore({"a": series_a, "b": series_b}) as store``: ``store.url`` is the central store,
    ``store.clusters[name]`` each cluster's own Prometheus; both hold every sample when ``start`` returns."""

    def __init__(
        self, history: Mapping[str, Sequence[Series]], *, label: str = "cluster", timeout_s: float = 60.0
    ) -> None:
        self.history, self.label, self.timeout_s = dict(history), label, timeout_s
        self.servers: dict[str, _Server] = {}
        self.timings: dict[str, float] = {}
        self._workdir: Path | None = None

    @property
    def url(self) -> str:
        return self.servers["central"].url

    @property
    def clusters(self) -> dict[str, str]:
        """Each cluster's own Prometheus URL."""
        return {name: self.servers[name].url for name in self.history}

    def start(self) -> CentralStore:
        started = time.monotonic()
        self._workdir = Path(tempfile.mkdtemp(prefix="centralprom-"))
        try:
            self._start(started)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, started: float) -> None:
        assert self._workdir is not None
        receiver = "--web.enable-remote-write-receiver"
        central = self.servers["central"] = _Server(self._workdir, "central", "global: {}\n", receiver)
        central.wait_ready(started + self.timeout_s)
        for name in self.history:
            config = (
                f"global:\n  external_labels: {{{self.label}: {name}}}\nscrape_configs: []\n"
                f"remote_write:\n  - url: {central.url}/api/v1/write\n"
                "    queue_config: {batch_send_deadline: 200ms, min_backoff: 50ms, max_backoff: 1s}\n"
            )
            self.servers[name] = _Server(self._workdir, name, config, receiver)
        for name in self.history:
            self.servers[name].wait_ready(started + self.timeout_s)
        self.timings["started_s"] = time.monotonic() - started
        newest = {}
        for name, series in self.history.items():
            push(self.servers[name].url, series)
            newest[name] = max(samples[-1][0] for _, samples in series if samples)
        self.timings["pushed_s"] = time.monotonic() - started
        for name, stamp in newest.items():
            self._wait_for(name, stamp, started + self.timeout_s)
        self.timings["forwarded_s"] = time.monotonic() - started

    def _wait_for(self, name: str, stamp_ms: int, deadline: float) -> None:
        """Poll until the central store holds as many series at ``stamp_ms`` as the cluster's own server."""
        own = self._count(self.servers[name].url, 'count({__name__!=""})', stamp_ms)
        query = f'count({{{self.label}="{name}"}})'
        while time.monotonic() < deadline:
            if own and self._count(self.url, query, stamp_ms) == own:
                return
            time.sleep(0.1)
        logs = " | ".join(f"{server.name}: {server.log.read_text()[-400:]}" for server in self.servers.values())
        raise EnvironmentUnsupportedError(f"central store never got cluster {name}'s samples at {stamp_ms}: {logs}")

    @staticmethod
    def _count(url: str, query: str, stamp_ms: int) -> float:
        answer = requests.get(f"{url}/api/v1/query", params={"query": query, "time": str(stamp_ms / 1000)}, timeout=5)
        result: Iterable[dict[str, list[str]]] = answer.json().get("data", {}).get("result", [])
        return sum(float(item["value"][1]) for item in result)

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()
        self.servers = {}
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def __enter__(self) -> CentralStore:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
