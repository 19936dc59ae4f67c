"""A throwaway local Prometheus: backfill OpenMetrics with promtool, then serve it on loopback.

Used by the tests and the benchmarks (``bench/sim.py``, ``bench/export.py``) so that queries run against the
real server instead of mocked responses; no command needs it, so it lives with the tests, not in the runtime
package. Needs the ``prometheus`` and ``promtool`` binaries (Debian package ``prometheus``).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import requests

from predictor.errors import EnvironmentUnsupportedError, InputError

__all__ = ["LocalPrometheus", "backfill", "free_port", "prometheus_available", "stop_process", "wait_ready"]

# promtool cuts blocks at 2 h by default: 35 days then take minutes and the server spends minutes
# compacting hundreds of blocks. One large block per backfill is what makes tests fast.
_MAX_BLOCK_DURATION = "500h"


def prometheus_available() -> bool:
    """Whether both ``prometheus`` and ``promtool`` are on PATH."""
    return shutil.which("prometheus") is not None and shutil.which("promtool") is not None


def _require(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        raise EnvironmentUnsupportedError(f"{binary} not found on PATH (install the Debian package 'prometheus')")
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(process: subprocess.Popen[bytes], url: str, deadline: float, what: str) -> None:
    """Poll ``url``/-/ready until 200 or ``deadline`` (monotonic); a process that exits first is an error."""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise EnvironmentUnsupportedError(f"{what} exited with {process.returncode} at start")
        try:
            if requests.get(f"{url}/-/ready", timeout=1).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.05)
    raise EnvironmentUnsupportedError(f"{what} not ready in time")


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """Terminate ``process``, killing it if it has not exited within 20 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def backfill(openmetrics_path: Path, tsdb_dir: Path) -> float:
    """Write TSDB blocks for an OpenMetrics file into ``tsdb_dir``; returns the seconds promtool took."""
    promtool = _require("promtool")
    tsdb_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    done = subprocess.run(
        [
            promtool,
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            f"--max-block-duration={_MAX_BLOCK_DURATION}",
            str(openmetrics_path),
            str(tsdb_dir),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise InputError(f"promtool rejected {openmetrics_path}: {tail[0]}")
    return time.perf_counter() - started


class LocalPrometheus:
    """Context manager: ``with LocalPrometheus(tsdb) as prom: prom.url`` serves that TSDB on loopback."""

    def __init__(
        self, tsdb_dir: Path, *, port: int | None = None, ready_timeout_s: float = 60.0, scrape: tuple[str, ...] = ()
    ) -> None:
        """``scrape``: ``host:port`` targets scraped every second as job ``scraped`` (none by default)."""
        self.tsdb_dir = tsdb_dir
        self.scrape = scrape
        self.port = port or free_port()
        self.ready_timeout_s = ready_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LocalPrometheus:
        binary = _require("prometheus")
        self._workdir = Path(tempfile.mkdtemp(prefix="localprom-"))
        config = self._workdir / "prometheus.yml"
        jobs = "scrape_configs: []\n"
        if self.scrape:
            targets = ", ".join(f'"{t}"' for t in self.scrape)
            jobs = (
                "scrape_configs:\n  - job_name: scraped\n    scrape_interval: 1s\n    scrape_timeout: 1s\n"
                f"    static_configs:\n      - targets: [{targets}]\n"
            )
        config.write_text("global:\n  scrape_interval: 1m\n" + jobs, encoding="utf-8")
        log = (self._workdir / "prometheus.log").open("wb")
        self._process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.tsdb_dir}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                # Backfilled history is weeks old: the default 15 d retention would delete it.
                "--storage.tsdb.retention.time=100y",
                "--web.enable-lifecycle",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        assert self._process is not None
        try:
            wait_ready(
                self._process, self.url, time.monotonic() + self.ready_timeout_s, f"prometheus (log: {self.log_path})"
            )
        except EnvironmentUnsupportedError:
            self.stop()
            raise

    @property
    def log_path(self) -> Path | None:
        return None if self._workdir is None else self._workdir / "prometheus.log"

    def stop(self) -> None:
        if self._process is not None:
            stop_process(self._process)
        self._process = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def __enter__(self) -> LocalPrometheus:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
