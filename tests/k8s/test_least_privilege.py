"""Who may reach what, and who holds which privilege: the loop's NetworkPolicies, and the XDP load Job
that holds the capabilities the long-running node agent gave up.

The node agent keeps CAP_BPF and its own pin directory (``test_manifests.py`` pins that); loading,
attaching, upgrading and unloading happen only in ``k8s/xdp-load``, a Job an operator renders per node.
"""

from __future__ import annotations

import kubernetes_validate
import pytest
import typer

from predictor.names import is_dns1123_subdomain
from tests.k8s.manifests import K8S, OVERLAYS, Obj, containers, find, pod_spec, render, render_dir

KUBERNETES_VERSION = "1.37.0"
LOOP_NS, NODE_NS = "gpu-capacity-predictor", "gpu-capacity-predictor-node"
XDP_LOAD, XDP_LOAD_EXAMPLE = K8S / "xdp-load", K8S / "examples" / "xdp-load-node"
PIN_HOST_PATH = {"path": "/sys/fs/bpf/gpu-capacity-predictor", "type": "DirectoryOrCreate"}


def _selects(policy: Obj, labels: dict[str, str]) -> bool:
    selector = policy["spec"]["podSelector"]
    assert set(selector) <= {"matchLabels"}, "only matchLabels selectors are modelled here"
    return selector.get("matchLabels", {}).items() <= labels.items()


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_only_the_monitoring_namespace_reaches_the_loop_and_only_its_metrics_port(overlay: str) -> None:
    from predictor.config import load_settings

    objects = render(overlay)
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    assert policies and all(p["metadata"]["namespace"] == LOOP_NS for p in policies)
    for workload in (o for o in objects if pod_spec(o) is not None and o["metadata"]["namespace"] == LOOP_NS):
        template = workload["spec"]["jobTemplate"]["spec"] if workload["kind"] == "CronJob" else workload["spec"]
        labels = template["template"]["metadata"].get("labels", {})
        selecting = [p for p in policies if _selects(p, labels) and "Ingress" in p["spec"]["policyTypes"]]
        assert selecting, f"{workload['metadata']['name']} is not covered by an ingress policy"
        rules = [rule for p in selecting for rule in p["spec"].get("ingress", [])]
        if workload["metadata"]["name"] != "predictor-loop":
            assert rules == [], f"{workload['metadata']['name']} admits ingress"
            continue
        assert len(rules) == 1
        (peer,) = rules[0]["from"]
        assert peer == {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        (port,) = rules[0]["ports"]
        container = template["template"]["spec"]["containers"][0]
        named = {p["name"]: p["containerPort"] for p in container["ports"]}
        settings = load_settings(K8S / "base" / "settings.yaml")
        assert port["protocol"] == "TCP" and named[port["port"]] == settings.loop.metrics_port


def test_the_default_renderings_run_no_loader() -> None:
    """`kubectl apply -k k8s/` (or the apply overlay) never loads a program on a node by itself."""
    for overlay in OVERLAYS:
        assert not [o for o in render(overlay) if o["kind"] == "Job"]
        for _obj, _spec, container in containers(render(overlay)):
            assert set(container["securityContext"]["capabilities"].get("add", [])) <= {"BPF"}


def _job(objects: list[Obj]) -> Obj:
    (job,) = objects
    assert job["kind"] == "Job"
    return job


def _parse_cli(args: list[str]) -> None:
    """Parse (not run) a ``predictor xdp …`` argv with the real command: unknown flags fail here."""
    from predictor.commands.xdp import xdp_app

    assert args[0] == "xdp"
    group = typer.main.get_command(xdp_app)
    command = group.get_command(None, args[1])  # type: ignore[attr-defined]
    assert command is not None, f"no command predictor xdp {args[1]}"
    command.make_context(args[1], list(args[2:]))


@pytest.mark.parametrize("directory", [XDP_LOAD, XDP_LOAD_EXAMPLE], ids=["base", "example"])
def test_the_xdp_load_job_holds_the_loader_privileges_on_one_node(directory: object) -> None:
    job = _job(render_dir(directory))  # type: ignore[arg-type]
    kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)
    assert job["metadata"]["namespace"] == NODE_NS
    spec = job["spec"]
    assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] > 0 and spec["ttlSecondsAfterFinished"] > 0
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["hostNetwork"] is True
    assert pod["automountServiceAccountToken"] is False and pod["serviceAccountName"] == "predictor-node-agent"
    assert ("ServiceAccount", NODE_NS, "predictor-node-agent") in {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in render("dry-run")
    }
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert [v["hostPath"] for v in pod["volumes"] if "hostPath" in v] == [PIN_HOST_PATH]
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["BPF", "NET_ADMIN", "PERFMON"]}
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert not sc["privileged"] and sc["runAsUser"] == 0
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    args = container["args"]
    _parse_cli(args)
    agent = find(render("dry-run"), "DaemonSet", "predictor-node-agent")["spec"]["template"]["spec"]
    agent_mounts = {m["name"]: m["mountPath"] for c in agent["containers"] for m in c.get("volumeMounts", [])}
    # The Job pins exactly where the agent looks: the same host directory at the same container path.
    assert args[args.index("--pin-dir") + 1] == mounts["xdp-pins"] == agent_mounts["xdp-pins"]
    if directory == XDP_LOAD:
        # Unpatched: a harmless command on a node name the API server refuses (not a DNS subdomain).
        assert args[:2] == ["xdp", "status"] and not is_dns1123_subdomain(pod["nodeName"])
    else:
        assert args[:2] == ["xdp", "load"] and is_dns1123_subdomain(pod["nodeName"])
        assert job["metadata"]["name"].endswith(pod["nodeName"])


@pytest.mark.parametrize(
    "args",
    [
        ["xdp", "upgrade", "--pin-dir", "/bpf/gpu-capacity-predictor"],
        ["xdp", "unload", "--pin-dir", "/bpf/gpu-capacity-predictor"],
    ],
)
def test_the_documented_upgrade_and_unload_commands_parse(args: list[str]) -> None:
    text = (XDP_LOAD_EXAMPLE / "kustomization.yaml").read_text(encoding="utf-8")
    assert f"[{', '.join(args)}]" in text
    _parse_cli(args)


# ------------------------------------------------------------------------------- registry credentials
READER, WRITER, SIGNING = "predictor-mlflow-reader", "predictor-mlflow-writer", "predictor-model-signing"
TRAINERS = {"predictor-train-forecast", "predictor-train-demand", "predictor-train-rca", "predictor-retrain"}


def _secret_uses(spec: Obj) -> dict[str, set[str]]:
    """Secret name → how the pod reaches it (env variable, envFrom, volume, projected volume)."""
    uses: dict[str, set[str]] = {}
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        for item in container.get("env", []):
            ref = item.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                uses.setdefault(ref["name"], set()).add(f"env {item['name']}")
        for source in container.get("envFrom", []):
            if "secretRef" in source:
                uses.setdefault(source["secretRef"]["name"], set()).add("envFrom")
    for volume in spec.get("volumes", []):
        if "secret" in volume:
            uses.setdefault(volume["secret"]["secretName"], set()).add(f"volume {volume['name']}")
        for source in volume.get("projected", {}).get("sources", []):
            if "secret" in source:
                uses.setdefault(source["secret"]["name"], set()).add(f"projected volume {volume['name']}")
    return uses


@pytest.mark.parametrize("overlay", [*sorted(OVERLAYS), "retrain-all"])
def test_the_loop_reads_the_registry_with_its_own_credential_and_never_holds_the_writers(overlay: str) -> None:
    """A compromised loop cannot register or promote a model: only the training jobs get the writer token."""
    from tests.k8s.manifests import render_with_retrain_all

    objects = render_with_retrain_all() if overlay == "retrain-all" else render(overlay)
    mlflow_env = {"env MLFLOW_TRACKING_TOKEN", "env MLFLOW_TRACKING_PASSWORD"}
    seen = set()
    for workload in objects:
        spec = pod_spec(workload)
        if spec is None:
            continue
        name, uses = workload["metadata"]["name"], _secret_uses(spec)
        if name in TRAINERS:
            seen.add(name)
            assert uses[WRITER] == mlflow_env and READER not in uses, name
        else:
            assert WRITER not in uses, f"{name} can reach the registry writer's Secret ({uses[WRITER]})"
        if name == "predictor-loop":
            seen.add(name)
            assert uses[READER] == mlflow_env
        # the signing key is mounted read-only wherever it is mounted
        signing = {v["name"] for v in spec.get("volumes", []) if v.get("secret", {}).get("secretName") == SIGNING}
        for container in spec["containers"]:
            for mount in container.get("volumeMounts", []):
                assert mount["name"] not in signing or mount.get("readOnly") is True, name
    # the component replaces the per-family jobs with one
    trainers = {"predictor-retrain"} if overlay == "retrain-all" else TRAINERS - {"predictor-retrain"}
    assert seen == {"predictor-loop", *trainers}
