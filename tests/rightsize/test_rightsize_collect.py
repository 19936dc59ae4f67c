"""``predictor rightsize`` finds the pods ``predictor collect`` labelled, through a real Prometheus scraping it.

On a node without dcgm-exporter, GPU use reaches right-sizing only if ``collect`` puts the kubelet's
``namespace``/``pod`` on its series. Here a kubelet (real gRPC pod-resources API on a Unix socket) assigns
both GPUs of a fake NVML node to one pod, a real Prometheus scrapes ``collect`` and a kube-state-metrics
stand-in every second, and ``rightsize`` is run against that Prometheus.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
import requests
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from predictor.cli import main
from predictor.sources.podresources import DeviceOwners
from tests.support.fake_nvml import FakeNvml, serving
from tests.support.kubelet import Assigned, KubeletPodResources
from tests.support.localprom import LocalPrometheus, free_port, prometheus_available


@contextmanager
def kube_state_metrics(namespace: str, pod: str, gpus: int) -> Iterator[str]:
    """The one kube-state-metrics series right-sizing needs: the pod's GPU request."""
    registry = CollectorRegistry()
    requests_ = Gauge(
        "kube_pod_container_resource_requests",
        "Requested resources by a container.",
        ["namespace", "pod", "container", "node", "resource", "unit"],
        registry=registry,
    )
    requests_.labels(namespace, pod, "trainer", "node-007", "nvidia_com_gpu", "integer").set(gpus)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _held_samples(prom: LocalPrometheus) -> int:
    answer = requests.get(
        f"{prom.url}/api/v1/query", params={"query": 'count_over_time(DCGM_FI_DEV_GPU_UTIL{pod!=""}[1m])'}, timeout=5
    ).json()
    return sum(int(r["value"][1]) for r in answer["data"]["result"])


@pytest.mark.slow  # a real Prometheus scraping the collector for several seconds
def test_rightsize_sees_the_pod_collect_labelled(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    if not prometheus_available():
        pytest.skip("prometheus/promtool not installed (Debian package 'prometheus')")
    socket_path = tmp_path_factory.mktemp("kl") / "kubelet.sock"
    assigned = [Assigned("team-a", "bert-ft-0", "trainer", "nvidia.com/gpu", ["GPU-aaaa", "GPU-bbbb"])]
    start = pd.Timestamp.now(tz="UTC").floor("s")
    with (
        KubeletPodResources(socket_path, assigned),
        serving(FakeNvml(), DeviceOwners(str(socket_path))) as collector,
        kube_state_metrics("team-a", "bert-ft-0", gpus=2) as ksm,
        LocalPrometheus(tmp_path / "tsdb", scrape=(collector.removeprefix("http://"), ksm)) as prom,
    ):
        deadline = time.monotonic() + 30
        while _held_samples(prom) < 10 and time.monotonic() < deadline:  # 5 scrapes of both GPUs
            time.sleep(0.5)
        end = pd.Timestamp.now(tz="UTC").ceil("s")
        out = tmp_path / "rightsize.csv"
        args = ["--prometheus-url", prom.url, "--start", start.isoformat(), "--end", end.isoformat()]
        assert main(["rightsize", *args, "--step", "1s", "--out", str(out)]) == 0
    table = pd.read_csv(out)
    row = table[(table["namespace"] == "team-a") & (table["workload"] == "bert-ft")]
    assert len(row) == 1, table[["namespace", "workload"]]
    assert row["gpu_request"].iloc[0] == 2
    assert row["gpu_type"].iloc[0] == "H100"  # modelName came through with the pod labels
    assert row["gpus_used_p95"].iloc[0] == pytest.approx(1.0)  # GPU 0 busy (87 %), GPU 1 idle
