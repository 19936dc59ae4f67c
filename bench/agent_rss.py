"""Peak resident memory of the node agents (``predictor collect``, ``predictor xdp agent``) per command.

Why: the node-agent DaemonSet (k8s/base/node-agent.yaml) limits each container's memory, and those
limits are set from these numbers. Every row runs the command in a fresh interpreter and reads its
peak RSS from ``os.wait4`` (``ru_maxrss``) in a small launcher, so rows do not mix. The baseline, in
the same run, is ``predictor --help`` with every command module and torch, pandas and scikit-learn
imported: what every command cost at start when the CLI imported all command modules.

- ``collect`` runs for real against a simulated NVML (``tests/support/fake_pynvml``, first on the
  child's ``PYTHONPATH``: 8 H100s by default) and is scraped over HTTP once per interval;
- ``xdp agent`` runs for real with no program loaded (no bpffs here): it holds, as on a node before the
  loader Job ran, serves ``/metrics`` and is scraped once per cycle.

Run from the repository root: ``python -m bench.agent_rss [--gpus 8] [--scrapes 5]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAKE_PYNVML = REPO / "tests" / "support" / "fake_pynvml"
GOAL_MIB = 150.0

BASELINE = (
    "import torch, pandas, sklearn\n"
    "from predictor.commands import COMMANDS, TRAIN_COMMANDS\n"
    "for entry in (*COMMANDS, *TRAIN_COMMANDS):\n"
    "    entry.load()\n"
    "from predictor.cli import main\n"
    "main(['--help'])\n"
)


@dataclass(frozen=True)
class Row:
    name: str
    peak_mib: float


def _env(*, fake_nvml: bool = False) -> dict[str, str]:
    # The children must import this checkout (not an installed copy) and, for collect, the simulated NVML.
    paths = [str(FAKE_PYNVML)] if fake_nvml else []
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, str(REPO)])}


def _kib_to_mib(maxrss: int) -> float:
    return maxrss / (1024 * 1024) if sys.platform == "darwin" else maxrss / 1024  # macOS reports bytes


# Runs argv[2:] as its child and writes that child's peak RSS (ru_maxrss) and exit code to argv[1].
# Linux counts the pages a process held before exec() into its ru_maxrss: a command forked straight
# from a big parent (a pytest process with pandas loaded) would report the parent's size. This launcher
# is a fresh small interpreter, so the command it forks starts small and its peak is its own.
LAUNCHER = """
import os, signal, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(f"{usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}")
"""


def peak_rss_mib(
    argv: Sequence[str], env: dict[str, str], during: Callable[[subprocess.Popen[bytes]], None] | None = None
) -> float:
    """Run ``argv``, let ``during`` drive it (then stop it), and return its peak RSS in MiB."""
    with tempfile.TemporaryDirectory() as tmp:
        report, log = Path(tmp) / "report", Path(tmp) / "stderr"
        with log.open("wb") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-c", LAUNCHER, str(report), *argv],
                env=env,
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
            try:
                if during is not None:
                    during(proc)
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        if not report.exists():
            raise RuntimeError(f"{' '.join(argv[1:])}: no measurement: {log.read_text()[-500:]}")
        maxrss, code = (int(x) for x in report.read_text().split())
        if code not in (0, -signal.SIGTERM):
            raise RuntimeError(f"{' '.join(argv[1:])} exited {code}: {log.read_text().strip()[-500:]}")
    return _kib_to_mib(maxrss)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _scrape(url: str, times: int, every_s: float, proc: subprocess.Popen[bytes], *, ready_s: float = 60.0) -> None:
    """Wait for ``url`` to answer, then read it ``times`` times, ``every_s`` apart."""
    deadline = time.monotonic() + ready_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the command stopped before serving {url}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                response.read()
            break
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not answer within {ready_s:.0f} s") from None
            time.sleep(0.2)
    for _ in range(times):
        time.sleep(every_s)
        with urllib.request.urlopen(url, timeout=5) as response:
            response.read()


def predictor(*args: str) -> list[str]:
    return [sys.executable, "-m", "predictor.cli", *args]


def collect_run_peak_mib(*, gpus: int = 8, scrapes: int = 3, interval_s: float = 1.0) -> float:
    """Peak RSS of ``predictor collect`` on ``gpus`` simulated GPUs, scraped ``scrapes`` times."""
    port = free_port()
    argv = predictor("collect", "--address", "127.0.0.1", "--port", str(port), "--interval", f"{interval_s:g}")
    env = {**_env(fake_nvml=True), "FAKE_NVML_GPUS": str(gpus)}
    return peak_rss_mib(argv, env, lambda p: _scrape(f"http://127.0.0.1:{port}/metrics", scrapes, interval_s, p))


def xdp_agent_run_peak_mib(*, cycles: int = 3, interval_s: float = 1.0) -> float:
    """Peak RSS of ``predictor xdp agent`` holding (nothing loaded) for ``cycles`` cycles, /metrics scraped."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "agent.yaml"
        config.write_text(
            f"node: node-a\npin_dir: {tmp}/pins\ninputs: {tmp}/node-a.json\ninterval_s: {interval_s}\n"
            f"max_cycles: {cycles + 2}\ndry_run: true\nmetrics_port: {port}\nmetrics_address: 127.0.0.1\n",
            encoding="utf-8",
        )
        argv = predictor("xdp", "agent", "--agent-config", str(config))
        return peak_rss_mib(argv, _env(), lambda p: _scrape(f"http://127.0.0.1:{port}/metrics", cycles, interval_s, p))


def measure(gpus: int, scrapes: int) -> list[Row]:
    return [
        Row("baseline: predictor --help, everything imported", peak_rss_mib([sys.executable, "-c", BASELINE], _env())),
        Row("predictor --help", peak_rss_mib(predictor("--help"), _env())),
        Row("predictor collect --help", peak_rss_mib(predictor("collect", "--help"), _env())),
        Row("predictor xdp agent --help", peak_rss_mib(predictor("xdp", "agent", "--help"), _env())),
        Row(
            f"predictor collect, {gpus} fake GPUs, {scrapes} scrapes", collect_run_peak_mib(gpus=gpus, scrapes=scrapes)
        ),
        Row(f"predictor xdp agent, holding, {scrapes} cycles", xdp_agent_run_peak_mib(cycles=scrapes)),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--gpus", type=int, default=8, help="simulated GPUs on the node (collect run)")
    parser.add_argument("--scrapes", type=int, default=5, help="scrapes of /metrics, one per 1 s interval")
    args = parser.parse_args(argv)
    rows = measure(args.gpus, args.scrapes)
    base = rows[0].peak_mib
    width = max(len(r.name) for r in rows)
    print(f"{'command':<{width}}  {'peak RSS MiB':>12}  {'x baseline':>10}")
    for row in rows:
        print(f"{row.name:<{width}}  {row.peak_mib:>12.1f}  {row.peak_mib / base:>10.3f}")
    helps = [r for r in rows if r.name in ("predictor collect --help", "predictor xdp agent --help")]
    worst = max(r.peak_mib for r in helps)
    print(f"goal: agent --help under {GOAL_MIB:.0f} MiB: {'met' if worst < GOAL_MIB else 'MISSED'} ({worst:.1f})")
    return 0 if worst < GOAL_MIB else 1


if __name__ == "__main__":
    sys.exit(main())
