"""A fleet deployed in its home cluster (k8s/examples/fleet): the loop's Role names its per-cluster Leases.

The loop takes ``<loop.lease_name>-<cluster>`` in each cluster's own API; in the home cluster that is the
Lease of every member it reaches in-cluster (no ``kube_context``, no ``kubeconfig``). Everything else the
loop may do stays what ``test_rbac.py`` pins for one cluster.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from predictor.config import load_settings
from predictor.loop.fleet import cluster_settings
from tests.k8s.manifests import K8S, Obj, find, render_dir
from tests.k8s.test_rbac import EXPECTED, grants

FLEET = K8S / "examples" / "fleet"


def settings_map(objects: list[Obj]) -> Obj:
    """The settings ConfigMap (its name carries kustomize's content hash)."""
    [config] = [
        o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("predictor-settings-")
    ]
    return config


def test_the_fleet_role_names_the_lease_of_each_in_cluster_member_and_nothing_more(tmp_path: Path) -> None:
    objects = render_dir(FLEET)
    config = settings_map(objects)
    (tmp_path / "settings.yaml").write_text(config["data"]["settings.yaml"], encoding="utf-8")
    settings = load_settings(tmp_path / "settings.yaml")
    assert settings.clusters, "the example lists no clusters"
    here = {
        cluster_settings(settings, c.name).loop.lease_name
        for c in settings.clusters
        if c.kube_context is None and c.kubeconfig is None
    }
    assert here == {"gpu-capacity-predictor-loop-home"}
    loop = ("gpu-capacity-predictor", "predictor-loop")
    expected = {k: v for k, v in EXPECTED[loop].items() if not k[1].startswith("leases/")}
    expected |= {("coordination.k8s.io", f"leases/{name}"): {"get", "update"} for name in here}
    assert grants(objects) == {loop: expected}


def test_every_member_kubeconfig_is_mounted_into_the_loop() -> None:
    objects = render_dir(FLEET)
    config = settings_map(objects)
    deployment = find(objects, "Deployment", "predictor-loop")
    mounts = [
        m["mountPath"] for c in deployment["spec"]["template"]["spec"]["containers"] for m in c.get("volumeMounts", [])
    ]
    for cluster in yaml.safe_load(config["data"]["settings.yaml"])["clusters"]:
        if cluster.get("kubeconfig"):
            assert any(str(cluster["kubeconfig"]).startswith(m.rstrip("/") + "/") for m in mounts), cluster
