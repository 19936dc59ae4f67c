"""The kustomize overlays render, validate against the Kubernetes and Volcano schemas, and keep the
security and operations properties a cluster admin relies on (no root where avoidable, limits on every
container, pinned images, dry-run by default)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.k8s.manifests import (
    K8S,
    KUBERNETES_VERSION,
    OVERLAYS,
    REPO,
    Obj,
    containers,
    counts_by_kind,
    find,
    is_builtin,
    is_volcano,
    pod_spec,
    render,
    render_dir,
    render_with_retrain_all,
)

EXPECTED_KINDS = {
    "ClusterRole": 1,
    "ClusterRoleBinding": 1,
    "ConfigMap": 4,
    "CronJob": 3,
    "DaemonSet": 1,
    "Deployment": 1,
    "Namespace": 2,
    "NetworkPolicy": 2,
    "PersistentVolumeClaim": 1,
    "PrometheusRule": 1,
    "Role": 2,
    "RoleBinding": 2,
    "Service": 2,
    "ServiceAccount": 3,
    "ServiceMonitor": 2,
}
LOOP_NS, NODE_NS = "gpu-capacity-predictor", "gpu-capacity-predictor-node"
PIN_HOST_PATH = {"path": "/sys/fs/bpf/gpu-capacity-predictor", "type": "DirectoryOrCreate"}
POD_RESOURCES_HOST_PATH = {"path": "/var/lib/kubelet/pod-resources", "type": "Directory"}
# the Secrets an operator creates (base/secret.example.yaml); every reference to them is optional
USER_SECRETS = ("predictor-credentials", "predictor-mlflow-reader", "predictor-mlflow-writer")
XDP_LOAD, XDP_LOAD_EXAMPLE = K8S / "xdp-load", K8S / "examples" / "xdp-load-node"


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_overlay_renders_every_piece(overlay: str) -> None:
    assert counts_by_kind(render(overlay)) == EXPECTED_KINDS


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_builtin_objects_pass_strict_kubernetes_schemas(overlay: str) -> None:
    builtin = [o for o in render(overlay) if is_builtin(o)]
    assert len(builtin) == sum(EXPECTED_KINDS.values()) - 3  # all but the 2 ServiceMonitors and the PrometheusRule
    for obj in builtin:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_strict_validation_rejects_an_unknown_field() -> None:
    deployment = copy.deepcopy(find(render("dry-run"), "Deployment", "predictor-loop"))
    deployment["spec"]["template"]["spec"]["containers"][0]["resource"] = {}  # typo of `resources`
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def _strict(schema: Any) -> Any:
    """A CRD schema that rejects unknown fields like the API server's strict field validation does."""
    if isinstance(schema, dict):
        schema = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


# The Volcano CRDs the package bundles (the manifests hold Queues only, and the actuator validates against
# the same files).
CRD_DIR = REPO / "predictor" / "actuators" / "schemas"


def _volcano_validator(obj: Obj) -> jsonschema.Draft7Validator:
    group, _, version = obj["apiVersion"].partition("/")
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        if crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == obj["kind"]:
            served = next(v for v in crd["spec"]["versions"] if v["name"] == version)
            schema = _strict(served["schema"]["openAPIV3Schema"])
            schema["properties"]["metadata"] = {"type": "object"}
            return jsonschema.Draft7Validator(schema)
    raise AssertionError(f"no CRD in {CRD_DIR} for {obj['apiVersion']} {obj['kind']}")


def _volcano_objects() -> list[Obj]:
    rendered = [o for overlay in OVERLAYS for o in render(overlay) if is_volcano(o)]
    examples = [d for d in yaml.safe_load_all((K8S / "examples" / "queues.yaml").read_text(encoding="utf-8")) if d]
    return rendered + examples


def test_volcano_objects_pass_the_crd_schemas() -> None:
    objects = _volcano_objects()
    assert objects, "expected at least the example queues"
    for obj in objects:
        errors = sorted(_volcano_validator(obj).iter_errors(obj), key=str)
        assert not errors, f"{obj['kind']}/{obj['metadata']['name']}: {errors[0].message}"


def test_volcano_validation_rejects_a_misspelt_field() -> None:
    queue = copy.deepcopy(_volcano_objects()[0])
    queue["spec"]["deserve"] = queue["spec"].pop("deserved")
    assert list(_volcano_validator(queue).iter_errors(queue))


def test_recommend_only_and_opt_in_is_the_default_and_apply_is_explicit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from predictor.config import load_settings

    seen = {}
    for overlay in OVERLAYS:
        objects = render(overlay)
        loop = find(objects, "Deployment", "predictor-loop")
        settings_cm = next(o for o in objects if o["metadata"]["name"].startswith("predictor-settings"))
        path = tmp_path / f"{overlay}.yaml"
        path.write_text(settings_cm["data"]["settings.yaml"], encoding="utf-8")
        with monkeypatch.context() as env:  # the settings the loop container really gets: file, then variables
            for item in loop["spec"]["template"]["spec"]["containers"][0]["env"]:
                if item["name"].startswith("PREDICTOR_ACTUATORS__") and "value" in item:
                    env.setenv(item["name"], item["value"])
            actuators = load_settings(path).actuators
        seen[overlay] = (actuators.queues.writes, actuators.queues.mode, actuators.xdp.mode)
        assert (
            not actuators.queues.manage.all and actuators.queues.manage.annotation == "gpu-capacity-predictor/managed"
        )
        agent_cm = next(o for o in objects if o["metadata"]["name"].startswith("predictor-agent-config"))
        agent = yaml.safe_load(agent_cm["data"]["agent.yaml.tmpl"])
        assert agent["dry_run"] is (overlay != "apply")
    assert seen == {
        "recommend": ("apply", "recommend", "apply"),  # annotations written, no spec changed, agents fed
        "dry-run": ("server-dry-run", "recommend", "apply"),  # every queue write only validated
        "apply": ("apply", "apply", "apply"),
    }
    base = (K8S / "base" / "agent.yaml.tmpl").read_text(encoding="utf-8")
    apply = (K8S / "overlays" / "apply" / "agent.yaml.tmpl").read_text(encoding="utf-8")
    assert apply == base.replace("dry_run: true", "dry_run: false"), "the apply overlay's agent config drifted"


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_every_container_has_resources_and_a_pinned_image(overlay: str) -> None:
    seen = 0
    for obj, _spec, container in containers(render(overlay)):
        where = f"{obj['kind']}/{obj['metadata']['name']}/{container['name']}"
        resources = container.get("resources", {})
        assert {"cpu", "memory"} <= set(resources.get("requests", {})), where
        assert {"cpu", "memory"} <= set(resources.get("limits", {})), where
        image = container["image"]
        assert ":" in image.rsplit("/", 1)[-1] or "@sha256:" in image, f"{where}: unpinned image {image}"
        assert not image.endswith(":latest"), f"{where}: {image}"
        seen += 1
    assert seen == 7  # loop, 3 trainers, render-config init, xdp-agent, collect


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_security_contexts(overlay: str) -> None:
    for obj, spec, container in containers(render(overlay)):
        where = f"{obj['kind']}/{obj['metadata']['name']}/{container['name']}"
        sc = container["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False, where
        assert sc["readOnlyRootFilesystem"] is True, where
        assert sc["capabilities"]["drop"] == ["ALL"], where
        assert not sc.get("privileged"), where
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", where
        if container["name"] == "xdp-agent":
            # Root only because Kubernetes puts added capabilities in the effective set of UID 0 only. Only
            # CAP_BPF: loading, attaching and upgrading are the one-off Job's (k8s/xdp-load).
            assert sc["capabilities"]["add"] == ["BPF"]
            assert sc["runAsUser"] == 0
        elif container["name"] == "collect":
            # Root only to connect to the kubelet's root-owned pod-resources socket; no capability at all.
            assert "add" not in sc["capabilities"], where
            assert sc["runAsUser"] == 0
        else:
            assert "add" not in sc["capabilities"], where
            runs_as = sc.get("runAsUser", spec["securityContext"].get("runAsUser"))
            assert sc.get("runAsNonRoot", spec["securityContext"].get("runAsNonRoot")) is True, where
            assert runs_as and runs_as != 0, where


def test_only_the_node_agent_touches_the_host() -> None:
    objects = render("dry-run")
    for obj in objects:
        spec = pod_spec(obj)
        if spec is None:
            continue
        host_paths = [v["hostPath"] for v in spec.get("volumes", []) if "hostPath" in v]
        if obj["kind"] == "DaemonSet":
            assert obj["metadata"]["namespace"] == NODE_NS
            # Its own pin directory (never all of bpffs) and the kubelet's pod-resources directory.
            assert host_paths == [PIN_HOST_PATH, POD_RESOURCES_HOST_PATH]
            assert spec["hostNetwork"] is True
            assert spec["automountServiceAccountToken"] is False
        else:
            assert obj["metadata"]["namespace"] == LOOP_NS
            assert not host_paths and not spec.get("hostNetwork") and not spec.get("hostPID")
    namespaces = {o["metadata"]["name"]: o["metadata"]["labels"] for o in objects if o["kind"] == "Namespace"}
    assert namespaces[LOOP_NS]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert namespaces[NODE_NS]["pod-security.kubernetes.io/enforce"] == "privileged"


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_collect_reads_the_kubelet_pod_resources_read_only(overlay: str) -> None:
    from predictor.sources.podresources import DEFAULT_SOCKET

    objects = render(overlay)
    agent = find(objects, "DaemonSet", "predictor-node-agent")["spec"]["template"]["spec"]
    volume = next(v["name"] for v in agent["volumes"] if v.get("hostPath") == POD_RESOURCES_HOST_PATH)
    mounted = {c["name"]: m for c in agent["containers"] for m in c["volumeMounts"] if m["name"] == volume}
    assert set(mounted) == {"collect"} and mounted["collect"]["readOnly"] is True
    collect = next(c for c in agent["containers"] if c["name"] == "collect")
    socket = collect["args"][collect["args"].index("--pod-resources-socket") + 1]
    assert socket == DEFAULT_SOCKET and socket.startswith(mounted["collect"]["mountPath"] + "/")
    # The GPU holder's labels survive the scrape; the agent's own pod never names a GPU's holder.
    monitor = find(objects, "ServiceMonitor", "predictor-node-agent")
    endpoint = next(e for e in monitor["spec"]["endpoints"] if e["port"] == "gpu-metrics")
    assert endpoint["honorLabels"] is True
    drops = [r["regex"] for r in endpoint["relabelings"] if r.get("action") == "labeldrop"]
    for label in ("namespace", "pod", "container"):
        assert any(re.fullmatch(regex, label) for regex in drops), label
    assert not any(re.fullmatch(regex, "node") for regex in drops)


def test_secrets_never_travel_in_argv_or_config() -> None:
    objects = render("apply")
    for _obj, _spec, container in containers(objects):
        args = " ".join(container.get("args", []) + container.get("command", []))
        assert "token" not in args.lower() and "password" not in args.lower()
        for item in container.get("env", []):
            if any(word in item["name"] for word in ("TOKEN", "PASSWORD")):
                ref = item["valueFrom"]["secretKeyRef"]
                assert ref["name"] in USER_SECRETS and ref["optional"] is True
    settings_cm = next(o for o in objects if o["metadata"]["name"].startswith("predictor-settings"))
    settings = yaml.safe_load(settings_cm["data"]["settings.yaml"])
    assert not {"bearer_token", "basic_auth_password"} & set(settings["prometheus"])


def test_the_mounted_settings_load_with_the_real_settings_model(tmp_path: Path) -> None:
    from predictor.config import load_settings

    objects = render("apply")
    settings_cm = next(o for o in objects if o["metadata"]["name"].startswith("predictor-settings"))
    path = tmp_path / "settings.yaml"
    path.write_text(settings_cm["data"]["settings.yaml"], encoding="utf-8")
    settings = load_settings(path)
    assert settings.mlflow.tracking_uri.startswith("http")
    assert str(settings.actuators.audit_log).startswith("/var/lib/predictor/")
    loop = find(objects, "Deployment", "predictor-loop")
    container = loop["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][:2] == ["--config", "/etc/predictor/settings.yaml"]
    assert container["ports"][0]["containerPort"] == settings.loop.metrics_port
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/etc/predictor" in mounts and "/var/lib/predictor" in mounts


def test_the_agent_config_loads_with_the_real_agent_settings(tmp_path: Path) -> None:
    from predictor.actuators.xdp_agent import load_agent_settings

    for overlay in OVERLAYS:
        cm = next(o for o in render(overlay) if o["metadata"]["name"].startswith("predictor-agent-config"))
        path = tmp_path / f"{overlay}.yaml"
        text = cm["data"]["agent.yaml.tmpl"].replace("__NODE_NAME__", "node-000").replace("__HOST_IP__", "10.0.0.7")
        path.write_text(text, encoding="utf-8")
        settings = load_agent_settings(path)
        assert settings.node == "node-000" and settings.max_cycles == 0
        assert str(settings.inputs) == "/etc/predictor-xdp-inputs/node-000.json"
        assert settings.metrics_address == "10.0.0.7"  # the node's IP on the host network, not 0.0.0.0
        agent = find(render(overlay), "DaemonSet", "predictor-node-agent")["spec"]["template"]["spec"]
        xdp = next(c for c in agent["containers"] if c["name"] == "xdp-agent")
        assert settings.metrics_port in {p["containerPort"] for p in xdp["ports"]}
        mounts = {m["name"]: m["mountPath"] for m in xdp["volumeMounts"]}
        assert str(settings.pin_dir) == mounts["xdp-pins"]
        # render-config fills both placeholders from the downward API.
        init = agent["initContainers"][0]
        fields = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in init["env"]}
        assert fields == {"NODE_NAME": "spec.nodeName", "HOST_IP": "status.hostIP"}
        assert "__HOST_IP__/${HOST_IP}" in init["args"][0] and "__NODE_NAME__/${NODE_NAME}" in init["args"][0]
        collect = next(c for c in agent["containers"] if c["name"] == "collect")
        assert collect["args"][collect["args"].index("--address") + 1] == "$(HOST_IP)"


def test_loop_deployment_runs_once_with_probes() -> None:
    loop = find(render("dry-run"), "Deployment", "predictor-loop")
    assert loop["spec"]["replicas"] == 1
    assert loop["spec"]["strategy"]["type"] == "Recreate"
    container = loop["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][-1] == "loop"
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_every_reference_resolves(overlay: str) -> None:
    """Volumes, ServiceAccounts, Services and ServiceMonitors point at objects and ports that exist,
    except the user-created Secrets and the XDP-inputs and incidents ConfigMaps, which must be optional."""
    objects = render(overlay)
    names = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects}
    optional = {("Secret", name) for name in (*USER_SECRETS, "predictor-model-signing")}
    optional.add(("ConfigMap", "predictor-xdp-inputs"))
    optional.add(("ConfigMap", "predictor-incidents"))  # the user's labelled incidents for the rca training
    for obj in objects:
        spec = pod_spec(obj)
        if spec is None:
            continue
        ns = obj["metadata"]["namespace"]
        assert ("ServiceAccount", ns, spec["serviceAccountName"]) in names
        for volume in spec.get("volumes", []):
            for kind, key, ref in (
                ("ConfigMap", "configMap", "name"),
                ("PersistentVolumeClaim", "persistentVolumeClaim", "claimName"),
                ("Secret", "secret", "secretName"),
            ):
                if key in volume:
                    target = volume[key][ref]
                    if (kind, target) in optional:
                        assert volume[key]["optional"] is True
                    else:
                        assert (kind, ns, target) in names, f"{obj['metadata']['name']}: no {kind} {target}"
        for container in spec["containers"]:
            for item in container.get("env", []):
                ref = item.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ("Secret", ref["name"]) in optional and ref["optional"] is True
    for monitor in (o for o in objects if o["kind"] == "ServiceMonitor"):
        ns = monitor["metadata"]["namespace"]
        selector = monitor["spec"]["selector"]["matchLabels"]
        services = [
            o
            for o in objects
            if o["kind"] == "Service"
            and o["metadata"]["namespace"] == ns
            and selector.items() <= o["metadata"]["labels"].items()
        ]
        assert len(services) == 1, monitor["metadata"]["name"]
        service = services[0]
        ports = {p["name"]: p for p in service["spec"]["ports"]}
        pods = [
            o
            for o in objects
            if pod_spec(o) is not None
            and o["metadata"]["namespace"] == ns
            and service["spec"]["selector"].items()
            <= (o["spec"]["template"]["metadata"]["labels"] if o["kind"] != "CronJob" else {}).items()
        ]
        assert len(pods) == 1, service["metadata"]["name"]
        container_ports = {
            p["name"]: p["containerPort"]
            for c in pod_spec(pods[0])["containers"]  # type: ignore[index]
            for p in c.get("ports", [])
        }
        for endpoint in monitor["spec"]["endpoints"]:
            assert endpoint["port"] in ports
            assert ports[endpoint["port"]]["targetPort"] in container_ports


def test_dashboard_is_a_grafana_sidecar_dashboard() -> None:
    import json

    cm = find(render("dry-run"), "ConfigMap", "predictor-grafana-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    board = json.loads(cm["data"]["gpu-capacity-predictor.json"])
    assert board == json.loads((K8S / "base" / "monitoring" / "dashboard.json").read_text(encoding="utf-8"))
    panels = board["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    titles = " | ".join(p["title"] for p in panels)
    for needed in (
        "quota vs allocated vs forecast",
        "GPU utilisation by node",
        "Job → pod → node",
        "loop",
        "XDP packets per target",
    ):
        assert needed in titles
    for panel in panels:
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]


def test_two_images_of_one_release_the_node_workloads_run_the_agent_image() -> None:
    renderings = (
        render("dry-run"),
        render("apply"),
        render_with_retrain_all(),
        render_dir(XDP_LOAD),
        render_dir(XDP_LOAD_EXAMPLE),
    )
    images: dict[str, set[str]] = {"node": set(), "rest": set()}
    for objects in renderings:
        for workload, _spec, container in containers(objects):
            node = workload["metadata"]["namespace"] == "gpu-capacity-predictor-node"
            images["node" if node else "rest"].add(container["image"])
    # the DaemonSet and the XDP load Job share one image, so the program loaded matches the agent driving it
    (agent,) = images["node"]
    (full,) = images["rest"]
    assert agent.rsplit(":", 1)[0].endswith("/predictor-agent") and full.rsplit(":", 1)[0].endswith("/predictor")
    assert agent.rsplit(":", 1)[1] == full.rsplit(":", 1)[1], "the agent and the full image are one release"
