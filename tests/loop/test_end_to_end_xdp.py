"""The whole XDP path in one test, one run: simulated history in a real Prometheus → ``predictor loop
--once`` (the CLI, against the fake API server and a temp sqlite MLflow with a registered forecast
champion) → Queue patches that cite the served model → XDP agent inputs in the ConfigMap → ``predictor
xdp agent`` on a veth topology switches the active profile, the split follows the new weights and no
packet is dropped.

Needs root, a BPF-capable kernel, clang and the ``prometheus``/``promtool`` binaries; skips with the
reason otherwise (CI runs it as root).
"""

from __future__ import annotations

import json
import socket
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from predictor.actuators import xdp
from predictor.actuators.audit import AuditLog
from predictor.actuators.xdp_libbpf import Libbpf
from predictor.cli import main
from predictor.config import MlflowSettings
from predictor.planner.xdp_slots import apportion, flow_hash
from predictor.planner.xdp_types import Profile
from predictor.registry import CHAMPION, DEMAND_FAMILY, ModelRegistry
from tests.actuators.fake_apiserver import node_object, queue_object, serve
from tests.bpf.conftest import bpf_objects, bpffs, in_netns, lib, netns_pair  # noqa: F401 (fixtures)
from tests.bpf.test_veth import PORT, SO_NO_CHECK, InNetns, drain, receivers_with_xdp
from tests.loop.test_demand import _fitted_demand_model
from tests.support.actuators import resizing
from tests.support.fake_configmaps import FakeApiServerWithConfigMaps

pytestmark = [pytest.mark.root, pytest.mark.slow]

GPU = "nvidia.com/gpu"
NODE = "node-0"  # the node whose agent runs here; node-1 shares a multi-node job with it
CAPACITY_BPS = 25e9
NAMESPACE, CONFIGMAP = "gpu-capacity-predictor-node", "predictor-xdp-inputs"
FLOWS, ROUNDS, BURST = 600, 2, 100
# The families a queue's change records must cite.
CITED_FAMILIES = ("gpu-forecast", DEMAND_FAMILY)


def _openmetrics(path: Path, end: pd.Timestamp, targets: list[str]) -> None:
    """8 days every 2 min up to ``end``: queue demand, per-target link load with a daily rhythm, a GPU job mix.

    Samples closer together than Prometheus' 5-minute lookback, so an instant or range query at any time
    in the covered span sees every series.
    """
    stamps = pd.date_range(end=end, periods=8 * 24 * 30, freq="2min")
    t = np.array([s.timestamp() for s in stamps])
    hour = (t % 86_400) / 3600
    rhythm = 1 + 0.3 * np.sin(2 * np.pi * hour / 24)
    lines: list[str] = []

    def family(name: str, kind: str, series: list[tuple[dict[str, str], np.ndarray]]) -> None:
        base = name[: -len("_total")] if kind == "counter" else name
        lines.append(f"# TYPE {base} {kind}")
        for labels, values in series:
            text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            lines.extend(f"{name}{{{text}}} {v:.0f} {int(s)}" for v, s in zip(values, t, strict=True))

    # Bytes/s per target: light, heavy, medium (bits/s = ×8); node-1 the same, shifted.
    rates = {targets[0]: 0.2e9, targets[1]: 1.8e9, targets[2]: 1.0e9}
    for direction, scale in (("receive", 1.0), ("transmit", 0.5)):
        family(
            f"node_network_{direction}_bytes_total",
            "counter",
            [
                (
                    {"node": node, "device": dev, "instance": f"{node}:9100"},
                    np.cumsum(rate * scale * rhythm * 120) + 1e12,
                )
                for node in (NODE, "node-1")
                for dev, rate in rates.items()
            ],
        )
    family(
        "volcano_queue_request_scalar_resources",
        "gauge",
        [
            ({"queue_name": q, "resource": GPU}, np.full(len(t), level * 1000.0))
            for q, level in (("team-a", 22), ("team-b", 41))
        ],
    )
    pods = [("job-dist", "pod-d0", NODE, 4), ("job-dist", "pod-d1", "node-1", 4), ("job-solo", "pod-s0", NODE, 2)]
    ones = np.ones(len(t))
    family(
        "kube_pod_container_resource_requests",
        "gauge",
        [
            (
                {"namespace": "team-a", "pod": pod, "node": node, "container": "main", "resource": "nvidia_com_gpu"},
                ones * gpus,
            )
            for _job, pod, node, gpus in pods
        ],
    )
    family(
        "kube_pod_status_phase",
        "gauge",
        [({"namespace": "team-a", "pod": pod, "phase": "Running"}, ones) for _job, pod, _node, _gpus in pods],
    )
    family(
        "kube_pod_labels",
        "gauge",
        [
            (
                {
                    "namespace": "team-a",
                    "pod": pod,
                    "label_volcano_sh_job_name": job,
                    "label_volcano_sh_queue_name": "team-a",
                },
                ones,
            )
            for job, pod, _node, _gpus in pods
        ],
    )
    family(
        "kube_node_status_allocatable",
        "gauge",
        [  # the 12 GPU nodes the fake API server lists
            ({"node": f"node-{i}", "resource": "nvidia_com_gpu"}, ones * 8) for i in range(12)
        ],
    )
    path.write_text("\n".join(lines) + "\n# EOF\n", encoding="utf-8")


def _kubeconfig(path: Path, url: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "fake",
                "clusters": [{"name": "fake", "cluster": {"server": url}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
            }
        )
    )
    return path


def _send(topo: Any, enter: InNetns, bpf: Libbpf, pass_object: Path) -> tuple[list[int], dict[Any, int], int]:
    """FLOWS UDP flows × ROUNDS from the source namespace; returns source ports, (flow, round) → target, sent."""
    got: dict[tuple[int, int], int] = {}
    sent = 0
    with receivers_with_xdp(bpf, topo, enter, pass_object) as socks:
        with enter(topo.src_ns):
            senders = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(FLOWS)]
        try:
            for s in senders:
                s.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
                s.bind((topo.src_ip, 0))
            ports = [s.getsockname()[1] for s in senders]
            for rnd in range(ROUNDS):
                for i, s in enumerate(senders):
                    s.sendto(struct.pack("!II", i, rnd) + b"p" * 32, (topo.dst_ip, PORT))
                    sent += 1
                    if sent % BURST == 0:  # bursts well inside the receive backlog, even on a loaded machine
                        drain(socks, got, sent, 5.0)
                drain(socks, got, sent, 5.0)
        finally:
            for s in senders:
                s.close()
    return ports, got, sent


def test_loop_once_patches_queues_publishes_xdp_inputs_and_the_agent_switches(
    prometheus_from_openmetrics: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    lib: Libbpf,  # noqa: F811
    netns_pair: Any,  # noqa: F811
    in_netns: InNetns,  # noqa: F811
    bpffs: Path,  # noqa: F811
    bpf_objects: dict[str, Path],  # noqa: F811
) -> None:
    topo = netns_pair
    targets = topo.targets
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is ./mlruns
    monkeypatch.setenv("POD_NAME", "predictor-loop-0")

    # 1. Simulated history in a real Prometheus, ending now.
    # The last samples lie up to 2 min ahead: the loop's queries a few seconds from now still see them.
    now = pd.Timestamp.now(tz="UTC").ceil("2min")
    _openmetrics(tmp_path / "history.om", now, targets)
    prom = prometheus_from_openmetrics(tmp_path / "history.om")

    # 2. A forecast champion in a temp sqlite MLflow, trained from the same Prometheus.
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("PREDICTOR_PROMETHEUS__URL", prom.url)
    rc = main(
        [
            "train",
            "forecast",
            "--family",
            "queue",
            "--days",
            "7",
            "--model",
            "naive",
            "--horizon",
            "24",
            "--windows",
            "2",
            "--tracking-uri",
            tracking,
        ]
    )
    assert rc == 0, capsys.readouterr().err
    registry = ModelRegistry(MlflowSettings(tracking_uri=tracking))
    champion = registry.get("gpu-forecast", CHAMPION)
    assert champion is not None
    # ... and a gpu-demand champion (its queue-peak regressor is global and scale-free: fitted elsewhere,
    # served here on these queues' demand and pending series, as a fleet-wide model would be).
    demand = registry.log_model(DEMAND_FAMILY, _fitted_demand_model(), kind="tabular")
    registry.promote(DEMAND_FAMILY, demand.version)
    versions = {"gpu-forecast": champion.version, DEMAND_FAMILY: demand.version}

    # 3. The LB loaded on the front veth with an even boot profile; the agent will switch it.
    pin = bpffs / "lb"
    boot = Profile(name="boot-even", weights=dict.fromkeys(targets, 1))
    act = xdp.load(topo.front, targets, pin, mode="skb", profile=boot, obj_path=bpf_objects["lb"], lib=lib)
    fake = FakeApiServerWithConfigMaps(nodes=[node_object(f"node-{i}") for i in range(12)])
    fake.add_configmap(NAMESPACE, CONFIGMAP, {"node-gone.json": "{}"})  # shipped by k8s/; a departed node's key
    try:
        with serve(fake):
            fake.add(queue_object("team-a", deserved=16, capability=32, guarantee=4, allocated=10))
            fake.add(queue_object("team-b", deserved=40, capability=48, guarantee=8, allocated=12))
            config = tmp_path / "settings.yaml"
            config.write_text(
                yaml.safe_dump(
                    {
                        "prometheus": {"url": prom.url},
                        "mlflow": {"tracking_uri": tracking},
                        "actuators": {
                            **resizing("apply"),
                            "audit_log": str(tmp_path / "audit.jsonl"),
                            "plan_dir": str(tmp_path / "plans"),
                        },
                        "loop": {"xdp": {"enabled": True, "targets": targets, "capacity_bps": CAPACITY_BPS}},
                    }
                )
            )
            rc = main(
                [
                    "loop",
                    "--once",
                    "--config",
                    str(config),
                    "--kubeconfig",
                    str(_kubeconfig(tmp_path / "kubeconfig", fake.url)),
                ]
            )
            assert rc == 0, capsys.readouterr()

        # 4. Queue patches landed, audited as applied.
        records = AuditLog(tmp_path / "audit.jsonl").read()
        applied = [r for r in records if r["outcome"] == "applied"]
        assert fake.writes > 0 and applied, [r["reason"] for r in records]
        assert float(fake.queues["team-a"]["spec"]["deserved"][GPU]) > 16  # 22 GPUs of demand

        # 5. XDP inputs in the ConfigMap: one key per node, the departed node's removed.
        data = fake.configmaps[(NAMESPACE, CONFIGMAP)]["data"]
        assert sorted(data) == [f"{NODE}.json", "node-1.json"]
        inputs = json.loads(data[f"{NODE}.json"])
        chosen = json.loads((tmp_path / "plans" / "xdp" / "_profiles.json").read_text())[NODE]
        loads = {t["iface"]: t["forecast_bps"] for t in inputs["targets"]}
        assert loads[targets[0]] < loads[targets[2]] < loads[targets[1]]  # light < medium < heavy
        assert inputs["distributed_share"] == pytest.approx(4 / 8) and inputs["queues"] == {"team-a": 6.0}
        xdp_record = next(r for r in records if r["code"] == "xdp")
        assert "seasonal_mean_24" in xdp_record["reason"] and f"{NODE}-spare" in xdp_record["reason"]

        # 6. The agent on this node reads the published inputs (as the kubelet mounts the ConfigMap key).
        mounted = tmp_path / "xdp-inputs"
        mounted.mkdir()
        (mounted / f"{NODE}.json").write_text(data[f"{NODE}.json"])
        agent = tmp_path / "agent.yaml"
        agent.write_text(
            yaml.safe_dump(
                {
                    "node": NODE,
                    "pin_dir": str(pin),
                    "inputs": str(mounted / f"{NODE}.json"),
                    "dry_run": False,
                    "max_cycles": 1,
                }
            )
        )
        capsys.readouterr()
        assert main(["xdp", "agent", "--agent-config", str(agent)]) == 0
        cycle = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert cycle["applied"] and cycle["hold"] is None, cycle
        status = act.status()
        assert status.active_profile == f"{NODE}-spare" and not status.observe
        weights = [status.weights[t] for t in targets]
        assert status.weights == chosen["weights"]  # the agent chose what the loop showed on /metrics
        # More spare bandwidth, more weight: the light link gets the most, the heavy one the least.
        assert weights[0] > weights[2] > weights[1] > 0

        # 7. Traffic follows the new weights and nothing is dropped.
        table, seed = act.table().slots, act.hash_seed()
        ports, got, sent = _send(topo, in_netns, lib, bpf_objects["pass"])
    finally:
        act.unload()
    assert len(got) == sent, f"lost {sent - len(got)} of {sent} packets"
    for i, sport in enumerate(ports):
        expected = table[flow_hash(topo.src_ip, topo.dst_ip, 17, sport, PORT, seed=seed) % len(table)]
        assert all(got[(i, rnd)] == expected for rnd in range(ROUNDS))
    slots = apportion(weights, len(table))
    assert [table.count(k) for k in range(len(targets))] == slots  # the slot table is the weights
    per_target = [sum(1 for (_flow, _rnd), k in got.items() if k == j) / sent for j in range(len(targets))]
    assert per_target == pytest.approx([w / sum(weights) for w in weights], abs=0.07)

    # 8. The queue changes cite the served forecast and demand models by version, and demand set team-a.
    for record in applied:
        for family in CITED_FAMILIES:
            assert record["models"][family] == f"models:/{family}/{versions[family]}"
    # team-a holds 22 GPUs of jobs, more than its forecast: the demand model set its target (the first
    # cycle's step limit may clip it; the reason then names the clip and the demand target it clipped).
    demand_uri = f"models:/{DEMAND_FAMILY}/{versions[DEMAND_FAMILY]}"
    assert any(
        r["queue"] == "team-a"
        and r["field"] == "deserved"
        and demand_uri in r["reason"]
        and (r["code"] == "demand" or "> forecast" in r["reason"])
        for r in applied
    ), [r["reason"] for r in applied]
