"""The node agent's memory limits hold what its containers really use, measured here on every run.

``collect`` runs for real against the simulated NVML (8 GPUs, scraped over HTTP) and ``xdp agent`` runs
for real while holding (no bpffs here), its /metrics scraped; the peak RSS of each must fit 1.5 times
under its container's limit in k8s/base/node-agent.yaml, so a limit cut too close fails here and not
as an OOM kill on a node. The same measurements are what ``python -m bench.agent_rss`` prints.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from bench.agent_rss import collect_run_peak_mib, xdp_agent_run_peak_mib
from tests.k8s.manifests import REPO

HEADROOM = 1.5
_UNITS = {"Ki": 1 / 1024, "Mi": 1.0, "Gi": 1024.0}


def _mib(quantity: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi)", quantity)
    assert match, f"memory {quantity!r}: use Ki, Mi or Gi"
    return float(match.group(1)) * _UNITS[match.group(2)]


def _container(name: str) -> dict[str, Any]:
    docs = yaml.safe_load_all((REPO / "k8s" / "base" / "node-agent.yaml").read_text(encoding="utf-8"))
    daemonset = next(d for d in docs if d and d["kind"] == "DaemonSet")
    containers: list[dict[str, Any]] = daemonset["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == name)


@pytest.mark.parametrize(
    ("container", "measure"),
    [
        ("collect", lambda: collect_run_peak_mib(gpus=8, scrapes=2)),
        ("xdp-agent", lambda: xdp_agent_run_peak_mib(cycles=2)),
    ],
)
def test_the_memory_limit_holds_a_measured_run(container: str, measure: Any) -> None:
    resources = _container(container)["resources"]
    limit = _mib(resources["limits"]["memory"])
    assert _mib(resources["requests"]["memory"]) <= limit
    peak = measure()
    assert peak > 10, f"implausible peak RSS {peak:.1f} MiB: the measurement is broken"
    assert limit >= HEADROOM * peak, f"{container}: limit {limit:g} MiB, measured peak {peak:.1f} MiB"
