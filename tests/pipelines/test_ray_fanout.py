"""Training fan-out on Ray: a real local cluster (a head and one worker node on 127.0.0.1) trains the same model.

A user relies on: ``retrain --ray ADDRESS`` registers the same model (state arrays) with the same backtest
metrics as the serial run, registered once by the driver, and builds the same root-cause training windows;
a missing Ray or an unreachable address is one clear error line, not minutes of retries. The cluster is
started with the ``ray`` CLI on free ports under a private temp dir, and every process it started is ended
by pid on the way out, also when the test fails.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from models.state import to_state
from pipelines.fanout import RayExecutor, make_executor, use_executor
from pipelines.forecast import ForecastJob, train_forecast
from pipelines.rca import QUICK_HELDOUT, QUICK_TRAIN
from pipelines.rca_data import build_dataset
from predictor import cli
from predictor.config import MlflowSettings, Settings
from predictor.errors import InputError
from predictor.registry import FORECAST_FAMILY, ModelRegistry

pytestmark = pytest.mark.slow

H = 24
JOB = ForecastJob(
    model="auto",
    horizon=H,
    windows=2,
    chunk_size=2,
    model_params={"candidates": ("naive", "seasonal_naive_24", "ets"), "windows": 2},
)


def fleet_history() -> pd.DataFrame:
    """Two clusters, five queues, three weeks: three chunks of at most two series."""
    rng = np.random.default_rng(5)
    t = pd.date_range("2026-03-02", periods=24 * 21, freq="1h", tz="UTC")
    cycle = np.sin(2 * np.pi * np.arange(t.size) / 24)
    return pd.concat(
        [
            pd.DataFrame(
                {
                    "cluster": f"c{i % 2}",
                    "series_id": f"q{i}",
                    "timestamp": t,
                    "value": (10 + 5 * i) * (1 + 0.4 * cycle) + rng.normal(0, 1, t.size),
                }
            )
            for i in range(5)
        ],
        ignore_index=True,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pids_under(marker: str) -> list[int]:
    """Processes whose command line names ``marker`` (this cluster's private temp dir): ours and no one else's."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _end(pids: list[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in pids):
            time.sleep(0.2)


@pytest.fixture
def ray_cluster() -> Iterator[str]:
    pytest.importorskip("ray")
    temp = tempfile.mkdtemp(prefix="rayt", dir="/tmp")  # short: Ray's unix sockets live under it
    port = _free_port()
    address = f"127.0.0.1:{port}"
    # the workers import this checkout exactly as the test process does
    # (and the machine's memory, shared with other jobs, must not make Ray kill and retry these tasks forever)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_memory_monitor_refresh_ms": "0",
        "HOME": temp,
    }  # HOME: no token file of another Ray session
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--object-store-memory", str(80 * 2**20)]
    ray_cli = [sys.executable, "-m", "ray.scripts.scripts", "start", "--temp-dir", temp]

    def start(*args: str) -> None:
        done = subprocess.run([*ray_cli, *args, *common], env=env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, f"ray start {' '.join(args)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"

    try:
        start("--head", "--port", str(port), "--include-dashboard", "false")
        start("--address", address)
        yield address
    finally:
        _end(_pids_under(temp))
        assert _pids_under(temp) == [], "a Ray process outlived the test"


def _state(settings: Settings) -> tuple[dict[str, object], dict[str, np.ndarray]]:
    return to_state(ModelRegistry(settings.mlflow).load_estimator(FORECAST_FAMILY))


def test_ray_fanout_registers_the_same_model_and_metrics_as_the_serial_run(
    ray_cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is under the working directory
    history = fleet_history()
    serial = Settings(mlflow=MlflowSettings(tracking_uri=f"sqlite:///{tmp_path / 'serial.db'}"))
    on_ray = Settings(mlflow=MlflowSettings(tracking_uri=f"sqlite:///{tmp_path / 'ray.db'}"))

    expected = train_forecast(serial, history, JOB, plots=False)
    with use_executor(make_executor(ray=ray_cluster)) as executor:
        assert isinstance(executor, RayExecutor)
        nodes = [n for n in executor._ray.nodes() if n["Alive"]]
        assert len(nodes) == 2, "the head and one worker node"
        got = train_forecast(on_ray, history, JOB, plots=False)

    assert got.version == expected.version == "1"  # registered once, by the driver
    assert got.metrics == expected.metrics
    pd.testing.assert_frame_equal(got.per_series, expected.per_series)
    (meta_a, arrays_a), (meta_b, arrays_b) = _state(serial), _state(on_ray)
    assert meta_a == meta_b
    assert arrays_a.keys() == arrays_b.keys() and arrays_a
    for name, array in arrays_a.items():
        np.testing.assert_array_equal(arrays_b[name], array, err_msg=name)
    assert "ChunkedForecaster" in str(meta_a["root"])[:200]  # five series in chunks of two: three fitted parts

    # the root-cause family's slow part, its simulated scenarios, fans out the same way
    scenarios = (*QUICK_TRAIN, *QUICK_HELDOUT)
    with use_executor(make_executor(ray=ray_cluster)):
        windows_on_ray = build_dataset(scenarios)
    pd.testing.assert_frame_equal(windows_on_ray, build_dataset(scenarios))


def test_an_unreachable_address_is_one_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ray")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: refused at once
        with pytest.raises(InputError, match=f"--ray 127.0.0.1:{port}: cannot reach a Ray cluster"):
            make_executor(ray=f"127.0.0.1:{port}")
    assert cli.main(["retrain", "--all", "--ray", "no-port-here"]) == 1  # before any family trains
    captured = capsys.readouterr()
    assert "error: --ray no-port-here: not an address" in captured.err + captured.out


def test_ray_missing_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError, as without the extra
    with pytest.raises(InputError, match=r"--ray needs Ray, which is not installed: pip install .*\[ray\]"):
        make_executor(ray="auto")
