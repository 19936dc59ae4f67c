"""The RBAC the overlays render grants exactly what the table below lists, to whom, and nothing more.

| service account (namespace)                          | API group             | resources    | verbs                  |
|------------------------------------------------------|-----------------------|--------------|------------------------|
| predictor-loop (gpu-capacity-predictor)              | scheduling.volcano.sh | queues       | get, list, watch, patch|
| predictor-loop (gpu-capacity-predictor)              | "" (core)             | nodes        | get, list, watch       |
| predictor-loop (gpu-capacity-predictor), Role        | coordination.k8s.io   | leases/<lease> | get, update          |
| predictor-loop (gpu-capacity-predictor), Role        | coordination.k8s.io   | leases       | create (by any name)   |
| predictor-loop, Role in gpu-capacity-predictor-node  | "" (core)             | configmaps/<cm> | get, patch         |

``<lease>`` is gpu-capacity-predictor-loop (``loop.lease_name``); create cannot be limited by name. The
XDP agents' inputs ConfigMap ``<cm>`` (predictor-xdp-inputs) is shipped empty: the loop needs no create.
| predictor-train (gpu-capacity-predictor)             | —                     | —            | — (token not mounted)  |
| predictor-node-agent (gpu-capacity-predictor-node)   | —                     | —            | — (token not mounted)  |
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from tests.k8s.manifests import OVERLAYS, Obj, find, pod_spec, render

EXPECTED = {
    ("gpu-capacity-predictor", "predictor-loop"): {
        ("scheduling.volcano.sh", "queues"): {"get", "list", "watch", "patch"},
        ("", "nodes"): {"get", "list", "watch"},
        ("coordination.k8s.io", "leases/gpu-capacity-predictor-loop"): {"get", "update"},
        ("coordination.k8s.io", "leases"): {"create"},
        ("", "configmaps/predictor-xdp-inputs"): {"get", "patch"},
    },
}
SERVICE_ACCOUNTS = {
    ("gpu-capacity-predictor", "predictor-loop"),
    ("gpu-capacity-predictor", "predictor-train"),
    ("gpu-capacity-predictor-node", "predictor-node-agent"),
}


def grants(objects: list[Obj]) -> dict[tuple[str, str], dict[tuple[str, str], set[str]]]:
    """(namespace, service account) -> (API group, resource) -> verbs, from every (Cluster)Role binding."""
    roles = {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
    }
    table: dict[tuple[str, str], dict[tuple[str, str], set[str]]] = defaultdict(lambda: defaultdict(set))
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        ref = binding["roleRef"]
        namespace = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
        role = roles[(ref["kind"], namespace, ref["name"])]
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount", f"{binding['metadata']['name']} binds a {subject['kind']}"
            for rule in role["rules"]:
                assert "nonResourceURLs" not in rule
                names = rule.get("resourceNames") or [""]
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        for name in names:  # a named grant is its own row: "leases/<name>"
                            key = (group, f"{resource}/{name}" if name else resource)
                            table[(subject["namespace"], subject["name"])][key] |= set(rule["verbs"])
    return {k: dict(v) for k, v in table.items()}


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_rbac_grants_exactly_the_listed_verbs(overlay: str) -> None:
    objects = render(overlay)
    assert grants(objects) == EXPECTED
    for role in (o for o in objects if o["kind"] in ("Role", "ClusterRole")):
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], role["metadata"]["name"]
            assert "aggregationRule" not in role


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_only_the_loop_gets_an_api_token(overlay: str) -> None:
    objects = render(overlay)
    accounts = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects if o["kind"] == "ServiceAccount"
    }
    assert set(accounts) == SERVICE_ACCOUNTS
    for obj in objects:
        spec = pod_spec(obj)
        if spec is None:
            continue
        account = (obj["metadata"]["namespace"], spec["serviceAccountName"])
        assert account in SERVICE_ACCOUNTS
        mounted = spec.get("automountServiceAccountToken", accounts[account].get("automountServiceAccountToken", True))
        assert mounted is (account in EXPECTED), f"{obj['kind']}/{obj['metadata']['name']} token mounted={mounted}"


def test_the_lease_the_role_names_is_the_one_the_loop_uses() -> None:
    from predictor.config import LoopSettings

    objects = render("dry-run")
    role = next(o for o in objects if o["kind"] == "Role" and o["metadata"]["name"].endswith("-lease"))
    named = [r for r in role["rules"] if r.get("resourceNames")]
    settings = LoopSettings()
    assert [n for r in named for n in r["resourceNames"]] == [settings.lease_name]
    assert role["metadata"]["namespace"] == settings.lease_namespace
    claim = find(objects, "PersistentVolumeClaim", "predictor-loop-state")
    assert claim["spec"]["accessModes"] == ["ReadWriteOncePod"]


def test_the_code_reads_no_more_than_the_loop_role_grants() -> None:
    """The core-API calls in the runtime are the ones the role covers: nodes only, never pods."""
    import re

    from tests.k8s.manifests import REPO

    sources = {p: p.read_text(encoding="utf-8") for p in (REPO / "predictor").rglob("*.py")}
    core_calls = {m for text in sources.values() for m in re.findall(r"CoreV1Api\([^)]*\)\.(\w+)", text)}
    assert core_calls == {"list_node"}
    pod_call = re.compile(r"\b\w+_(namespaced_pod|pod_for_all_namespaces)\w*\b")
    pod_calls = [p.name for p, text in sources.items() if pod_call.search(text)]
    assert not pod_calls, f"pod API calls in {pod_calls}: grant pods in k8s/base/rbac.yaml first"
