"""``predictor collect`` labels each GPU with the pod holding it, as told by a kubelet over the real API.

The kubelet here is a gRPC server speaking the v1 pod-resources proto on a Unix socket; what is checked is
the /metrics page a Prometheus would scrape.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from predictor.sources.nvml import GpuReading, MigIdentity
from predictor.sources.podresources import DeviceOwners, PodRef, device_owners
from tests.support.fake_nvml import FakeNvml, scrape, serving
from tests.support.kubelet import Assigned, KubeletPodResources

POD_LABELS = ("namespace", "pod", "container")


@pytest.fixture
def socket_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    # A Unix socket path must stay under 108 bytes: a short directory of its own, not the test's tmp_path.
    yield tmp_path_factory.mktemp("kl") / "kubelet.sock"


def _series(text: str, name: str) -> list[dict[str, str]]:
    family = next(f for f in text_string_to_metric_families(text) if f.name == name)
    return [dict(s.labels) for s in family.samples]


def _owner(labels: dict[str, str]) -> tuple[str, ...] | None:
    present = tuple(labels.get(k, "") for k in POD_LABELS)
    return present if any(present) else None


def test_scraped_gpus_carry_the_pod_and_container_holding_them(socket_path: Path) -> None:
    assigned = [
        Assigned("team-a", "bert-ft-0", "trainer", "nvidia.com/gpu", ["GPU-aaaa"]),
        Assigned("team-a", "bert-ft-0", "sidecar", "example.com/nic", ["GPU-bbbb"]),  # not a GPU resource
    ]
    with (
        KubeletPodResources(socket_path, assigned) as kubelet,
        serving(FakeNvml(), DeviceOwners(str(socket_path))) as url,
    ):
        first = scrape(url)
        kubelet.assigned = [Assigned("team-b", "llm-7d9f8c6b5-x2k4q", "main", "nvidia.com/gpu", ["GPU-bbbb"])]
        second = scrape(url)
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_XID_ERRORS"):
        by_gpu = {s["gpu"]: _owner(s) for s in _series(first, name)}
        assert by_gpu == {"0": ("team-a", "bert-ft-0", "trainer"), "1": None}, name
    # Asked again at every scrape: a pod that took a GPU since is seen at the next one.
    by_gpu = {s["gpu"]: _owner(s) for s in _series(second, "DCGM_FI_DEV_GPU_UTIL")}
    assert by_gpu == {"0": None, "1": ("team-b", "llm-7d9f8c6b5-x2k4q", "main")}
    assert kubelet.calls >= 2


def test_index_ids_and_time_sliced_replicas_map_to_their_gpu(socket_path: Path) -> None:
    assigned = [
        Assigned("ns", "by-index", "c", "nvidia.com/gpu", ["1"]),  # the device plugin's index strategy
        Assigned("ns", "shared-a", "c", "nvidia.com/gpu", ["GPU-aaaa::0"]),  # time-slicing replica 0
        Assigned("ns", "shared-b", "c", "nvidia.com/gpu", ["GPU-aaaa::1"]),
    ]
    with KubeletPodResources(socket_path, assigned), serving(FakeNvml(), DeviceOwners(str(socket_path))) as url:
        text = scrape(url)
    by_gpu = {s["gpu"]: s.get("pod") for s in _series(text, "DCGM_FI_DEV_GPU_UTIL")}
    assert by_gpu == {"0": "shared-a", "1": "by-index"}  # a shared GPU is reported once, for the first pod


def test_each_mig_device_is_a_series_with_its_instance_and_pod(socket_path: Path) -> None:
    backend = FakeNvml()
    backend.migs[1] = [
        MigIdentity(parent=1, index=0, uuid="MIG-1111", gpu_instance_id=7, compute_instance_id=0, profile="1g.10gb"),
        MigIdentity(parent=1, index=1, uuid="MIG-2222", gpu_instance_id=1, compute_instance_id=0, profile="3g.40gb"),
        MigIdentity(parent=1, index=2, uuid="MIG-3333", gpu_instance_id=2, compute_instance_id=0, profile="3g.40gb"),
    ]
    backend.mig_readings = {
        "MIG-1111": GpuReading(fb_used_bytes=5_000 * 2**20, fb_free_bytes=4_750 * 2**20),
        "MIG-2222": GpuReading(fb_used_bytes=30_000 * 2**20, fb_free_bytes=10_000 * 2**20),
        "MIG-3333": GpuReading(fb_used_bytes=0, fb_free_bytes=40_000 * 2**20),
    }
    assigned = [
        Assigned("team-a", "small-0", "c", "nvidia.com/mig-1g.10gb", ["MIG-1111"]),
        # Device plugins before MIG UUIDs named a MIG device by its parent GPU, GPU instance and compute instance.
        Assigned("team-b", "big-0", "c", "nvidia.com/mig-3g.40gb", ["MIG-GPU-bbbb/1/0"]),
    ]
    with KubeletPodResources(socket_path, assigned), serving(backend, DeviceOwners(str(socket_path))) as url:
        text = scrape(url)
    family = next(f for f in text_string_to_metric_families(text) if f.name == "DCGM_FI_DEV_FB_USED")
    mig = {s.labels["GPU_I_ID"]: s for s in family.samples if "GPU_I_ID" in s.labels}
    assert set(mig) == {"7", "1", "2"}
    assert mig["7"].value == 5_000 and mig["1"].value == 30_000
    assert mig["7"].labels["GPU_I_PROFILE"] == "1g.10gb" and mig["7"].labels["UUID"] == "GPU-bbbb"
    assert mig["7"].labels["gpu"] == "1" and mig["7"].labels["device"] == "nvidia1"
    assert _owner(mig["7"].labels) == ("team-a", "small-0", "c")
    assert _owner(mig["1"].labels) == ("team-b", "big-0", "c")
    assert _owner(mig["2"].labels) is None
    # Fields NVML does not report per MIG device are left out of the MIG series, not reported as 0.
    temps = _series(text, "DCGM_FI_DEV_GPU_TEMP")
    assert {s["gpu"] for s in temps} == {"0", "1"} and not any("GPU_I_ID" in s for s in temps)


def test_no_socket_exports_without_pod_labels_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    owners = DeviceOwners(str(tmp_path / "absent.sock"))
    with caplog.at_level(logging.INFO, logger="predictor.sources.podresources"), serving(FakeNvml(), owners) as url:
        texts = [scrape(url) for _ in range(3)]
    for text in texts:
        assert all(_owner(s) is None for s in _series(text, "DCGM_FI_DEV_GPU_UTIL"))
    said = [r for r in caplog.records if "no kubelet pod-resources socket" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.INFO


def test_a_kubelet_that_does_not_answer_costs_at_most_the_timeout(
    socket_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assigned = [Assigned("ns", "p", "c", "nvidia.com/gpu", ["GPU-aaaa"])]
    owners = DeviceOwners(str(socket_path), timeout_s=0.3)
    with KubeletPodResources(socket_path, assigned, delay_s=2.0), caplog.at_level(logging.WARNING):
        started = time.monotonic()
        assert owners() == {} and owners() == {}
        took = time.monotonic() - started
    assert took < 2.0  # two calls, each cut at 0.3 s, not waiting the kubelet's 2 s
    warned = [r for r in caplog.records if "did not answer" in r.getMessage()]
    assert len(warned) == 1 and "Deadline" in warned[0].getMessage()
    with KubeletPodResources(socket_path, assigned):
        assert owners() == {"GPU-aaaa": PodRef("ns", "p", "c")}  # it recovers once the kubelet answers


def test_the_client_reads_a_real_list_answer(socket_path: Path) -> None:
    assigned = [
        Assigned("a", "p1", "c1", "nvidia.com/gpu", ["GPU-1", "GPU-2"]),
        Assigned("a", "p1", "c2", "nvidia.com/gpu", ["GPU-3"]),
        Assigned("b", "p2", "c", "cpu-pinning.example/cores", ["0", "1"]),
    ]
    with KubeletPodResources(socket_path, assigned):
        owners = device_owners(str(socket_path))
    assert owners == {
        "GPU-1": PodRef("a", "p1", "c1"),
        "GPU-2": PodRef("a", "p1", "c1"),
        "GPU-3": PodRef("a", "p1", "c2"),
    }
