"""Helpers for the k8s tests: render the kustomize overlays and walk the rendered objects.

Rendering needs ``kubectl`` (its built-in kustomize); tests that need it skip with the reason when it is
missing. CI installs it from the ``kubectl`` Debian package (Kubernetes/Google Cloud apt repository).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "k8s"
SETTINGS = K8S / "base" / "settings.yaml"
KUBERNETES_VERSION = "1.37.0"  # the schemas kubernetes-validate checks the built-in objects against
OVERLAYS = {"recommend": K8S, "dry-run": K8S / "overlays" / "dry-run", "apply": K8S / "overlays" / "apply"}

Obj = dict[str, Any]


def require_kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.skip("kubectl not installed (CI installs the 'kubectl' package); cannot render kustomize overlays")
    return path


@functools.cache
def _render_text(directory: Path) -> str:
    done = subprocess.run(
        [require_kubectl(), "kustomize", str(directory)], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, f"kubectl kustomize {directory} failed: {done.stderr}"
    return done.stdout


def render(overlay: str) -> list[Obj]:
    """The objects ``kubectl kustomize`` renders for ``overlay`` (``recommend``, the default, is ``k8s/`` itself)."""
    return [doc for doc in yaml.safe_load_all(_render_text(OVERLAYS[overlay])) if doc]


def render_dir(directory: Path) -> list[Obj]:
    """The objects ``kubectl kustomize`` renders for any kustomization directory (e.g. ``k8s/xdp-load``)."""
    return [doc for doc in yaml.safe_load_all(_render_text(directory)) if doc]


@functools.cache
def render_with_retrain_all() -> list[Obj]:
    """The dry-run overlay plus the ``components/retrain-all`` component, as a user's overlay adds it."""
    with tempfile.TemporaryDirectory(prefix="k8s-overlay-") as tmp:
        # kustomize wants relative paths to other kustomization roots.
        root = os.path.relpath(K8S, tmp)
        (Path(tmp) / "kustomization.yaml").write_text(
            f"resources: [{root}/overlays/dry-run]\ncomponents: [{root}/components/retrain-all]\n", encoding="utf-8"
        )
        text = _render_text(Path(tmp))
    return [doc for doc in yaml.safe_load_all(text) if doc]


def counts_by_kind(objects: list[Obj]) -> dict[str, int]:
    return dict(sorted(Counter(o["kind"] for o in objects).items()))


def find(objects: list[Obj], kind: str, name: str) -> Obj:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
    return matches[0]


def pod_spec(obj: Obj) -> Obj | None:
    """The pod template spec of a workload (Deployment, DaemonSet, CronJob, Job), else None."""
    spec = obj.get("spec", {})
    if obj["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    template = spec.get("template")
    return None if template is None else template["spec"]


def containers(objects: list[Obj]) -> Iterator[tuple[Obj, Obj, Obj]]:
    """(workload, pod spec, container) for every container and init container of every workload."""
    for obj in objects:
        spec = pod_spec(obj)
        if spec is None:
            continue
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            yield obj, spec, container


def env_value(container: Obj, name: str) -> str | None:
    for item in container.get("env", []):
        if item["name"] == name:
            value = item.get("value")
            return None if value is None else str(value)
    return None


def is_volcano(obj: Obj) -> bool:
    return str(obj.get("apiVersion", "")).split("/")[0].endswith("volcano.sh")


def is_builtin(obj: Obj) -> bool:
    """Kinds whose schema ships with Kubernetes (CRD-backed kinds are checked separately)."""
    group = str(obj["apiVersion"]).rpartition("/")[0]
    return group == "" or group.endswith(".k8s.io") or "." not in group
