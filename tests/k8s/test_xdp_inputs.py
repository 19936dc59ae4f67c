"""The loop's XDP settings, the shipped ConfigMap, the loop's Role and the agents' mount name one object."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from predictor.actuators.xdp_agent import load_agent_settings
from predictor.config import load_settings
from tests.k8s.manifests import K8S, OVERLAYS, find, render


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_loop_writes_the_configmap_the_agents_mount(overlay: str, tmp_path: Path) -> None:
    objects = render(overlay)
    xdp = load_settings(K8S / "base" / "settings.yaml").loop.xdp
    assert xdp.enabled and xdp.targets
    cm = find(objects, "ConfigMap", xdp.configmap)
    assert cm["metadata"]["namespace"] == xdp.namespace and not cm.get("data")  # shipped empty
    role = find(objects, "Role", "gpu-capacity-predictor-loop-xdp-inputs")
    assert role["metadata"]["namespace"] == xdp.namespace
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [xdp.configmap], "verbs": ["get", "patch"]}
    ]
    agent = find(objects, "DaemonSet", "predictor-node-agent")
    spec = agent["spec"]["template"]["spec"]
    assert agent["metadata"]["namespace"] == xdp.namespace
    volume = next(v for v in spec["volumes"] if v.get("configMap", {}).get("name") == xdp.configmap)
    container = next(c for c in spec["containers"] if c["name"] == "xdp-agent")
    mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == volume["name"])
    template = next(o for o in objects if o["metadata"]["name"].startswith("predictor-agent-config"))
    path = tmp_path / "agent.yaml"
    path.write_text(
        template["data"]["agent.yaml.tmpl"].replace("__NODE_NAME__", "gpu-7").replace("__HOST_IP__", "10.0.0.7")
    )
    settings = load_agent_settings(path)
    assert settings.inputs == Path(mount) / "gpu-7.json"  # the key the loop writes for node gpu-7
    # The agent holds on inputs older than a missed loop cycle, not within one interval.
    interval = load_settings(K8S / "base" / "settings.yaml").loop.interval_s
    assert interval < settings.policy.stale_after_s < 2 * interval
    assert yaml.safe_load((K8S / "base" / "settings.yaml").read_text())["loop"]["xdp"]["capacity_bps"] > 0
