from __future__ import annotations

import threading
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from predictor.cli import main
from predictor.collect import build_registry, print_once, serve
from predictor.errors import EnvironmentUnsupportedError
from predictor.sources.nvml import PynvmlBackend
from tests.support.fake_nvml import FakeNvml


def _samples(text: str) -> dict[tuple[str, str], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, sample.labels["gpu"])] = sample.value
    return out


def test_readings_map_to_dcgm_names_units_and_labels():
    backend = FakeNvml()
    backend.xids = [(1, 79)]
    text = print_once(backend, hostname="node-007")
    values = _samples(text)
    assert values[("DCGM_FI_DEV_GPU_UTIL", "0")] == 87
    assert values[("DCGM_FI_DEV_FB_USED", "0")] == 40_000  # bytes → MiB
    assert values[("DCGM_FI_DEV_POWER_USAGE", "0")] == 612.5  # mW → W
    assert values[("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "0")] == 0x20
    assert values[("DCGM_FI_DEV_XID_ERRORS", "1")] == 79 and values[("DCGM_FI_DEV_XID_ERRORS", "0")] == 0
    assert ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "1") not in values  # unsupported → left out
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION untyped" in text  # names are not renamed to _total
    family = next(f for f in text_string_to_metric_families(text) if f.name == "DCGM_FI_DEV_GPU_TEMP")
    assert family.samples[0].labels == {
        "gpu": "0",
        "UUID": "GPU-aaaa",
        "pci_bus_id": "00000000:18:00.0",
        "device": "nvidia0",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": "node-007",
        "DCGM_FI_DRIVER_VERSION": "550.54.15",
    }


def test_last_xid_is_kept_between_scrapes():
    backend = FakeNvml()
    registry, collector = build_registry(backend, hostname="n")
    backend.xids = [(0, 48), (0, 63)]
    collector.poll_xid()
    from prometheus_client import generate_latest

    first = _samples(generate_latest(registry).decode())
    second = _samples(generate_latest(registry).decode())
    assert first[("DCGM_FI_DEV_XID_ERRORS", "0")] == 63 == second[("DCGM_FI_DEV_XID_ERRORS", "0")]


def test_serve_exposes_metrics_over_http():
    backend = FakeNvml()
    stop = threading.Event()
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    thread = threading.Thread(
        target=serve, args=(backend,), kwargs={"port": port, "address": "127.0.0.1", "interval_s": 0.05, "stop": stop}
    )
    thread.start()
    try:
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
                    body = response.read().decode()
                break
            except OSError:
                threading.Event().wait(0.05)
        assert "DCGM_FI_DEV_GPU_UTIL" in body
    finally:
        stop.set()
        thread.join(timeout=10)
    assert backend.closed


def test_no_driver_is_a_clear_error_and_exit_1(capsys):
    try:
        PynvmlBackend.open()
    except EnvironmentUnsupportedError as exc:
        assert "no NVIDIA driver" in str(exc)
    else:  # pragma: no cover - only on a machine with a GPU
        pytest.skip("an NVIDIA driver is present")
    for flags in ([], ["--pod-resources-socket", ""], ["--pod-resources-socket", "/nonexistent/kubelet.sock"]):
        assert main(["collect", "--port", "0", *flags]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: no NVIDIA driver") and len(err.strip().splitlines()) == 1
