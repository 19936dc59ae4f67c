"""Hardening of the XDP feature against the real kernel: a random flow-hash seed per load, a
pin directory that may be a mount point (the node agent's hostPath), and an agent that holds and says
why instead of crash-looping when nothing is loaded."""

from __future__ import annotations

import json
import os
import random
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from predictor.actuators import xdp
from predictor.actuators.xdp_agent import HOLD_REASONS, AgentSettings, AgentState, log_lines, run_agent
from tests.support.xdp_frames import XDP_REDIRECT, eth, ipv4, udp
from predictor.actuators.xdp_libbpf import Libbpf
from predictor.actuators.xdp_maps import LEGACY_SEED, SEED_MAP
from predictor.actuators.xdp_metrics import XdpStatsCollector
from predictor.planner.xdp_types import Profile
from predictor.planner.xdp_slots import flow_hash
from predictor.cli import main

WEIGHTS = [1, 1, 2, 0]
_rng = random.Random(19)
FLOWS = [(f"198.51.100.{_rng.randrange(1, 255)}", _rng.randrange(1024, 65535)) for _ in range(3000)]


def _choices(lib: Libbpf, act: xdp.XdpActuator) -> list[int]:
    """The target the kernel picks for each flow of FLOWS (read from the per-target counters)."""
    fd = lib.obj_get(act.pin_dir / "prog")
    out = []
    try:
        for src, sport in FLOWS:
            before = [p for p, _ in act.counters()[: xdp.MAX_TARGETS]]
            assert lib.test_run(fd, eth(ipv4(src, "192.0.2.10", udp(sport, 80)))).retval == XDP_REDIRECT
            after = [p for p, _ in act.counters()[: xdp.MAX_TARGETS]]
            (target,) = [i for i, (a, b) in enumerate(zip(after, before, strict=True)) if a != b]
            out.append(target)
    finally:
        os.close(fd)
    return out


@pytest.mark.root
def test_two_loads_get_different_seeds_and_the_split_still_follows_weights(
    bpffs: Path, dummies: tuple, lib: Libbpf, bpf_objects: dict
) -> None:
    front, targets = dummies
    seeds, choices = [], []
    for i in range(2):
        act = xdp.load(front, targets, bpffs / f"lb{i}", mode="skb", obj_path=bpf_objects["lb"], lib=lib,
                       profile=Profile(name="split", weights=dict(zip(targets, WEIGHTS, strict=True))))
        try:
            seed, table = act.hash_seed(), act.table().slots
            picked = _choices(lib, act)
        finally:
            act.unload()
        # Within one load every flow goes where the seeded hash says, and the shares follow the weights.
        assert picked == [table[flow_hash(s, "192.0.2.10", 17, p, 80, seed=seed) % len(table)] for s, p in FLOWS]
        shares = [picked.count(t) / len(FLOWS) for t in range(4)]
        assert shares == pytest.approx([w / sum(WEIGHTS) for w in WEIGHTS], abs=0.04)
        seeds.append(seed)
        choices.append(picked)
    assert seeds[0] != seeds[1]  # drawn from os.urandom per load (equal with probability 2**-32)
    # Another load sends flows elsewhere: with shares 1/4, 1/4, 1/2 a flow stays put with p = 0.375.
    moved = sum(a != b for a, b in zip(*choices, strict=True)) / len(FLOWS)
    assert moved > 0.5


@pytest.mark.root
def test_upgrading_a_load_without_a_seed_map_keeps_the_old_fixed_hash(
    bpffs: Path, dummies: tuple, lib: Libbpf, bpf_objects: dict
) -> None:
    """A program loaded by a build before per-load seeds has no lb_seed pin: the upgrade creates one
    holding the old fixed seed, so the flows it steered keep their targets."""
    front, targets = dummies
    act = xdp.load(front, targets, bpffs / "lb", mode="skb", obj_path=bpf_objects["lb"], lib=lib,
                   profile=Profile(name="split", weights=dict(zip(targets, WEIGHTS, strict=True))))
    try:
        (act.pin_dir / SEED_MAP).unlink()  # what an older build's pin directory looks like
        act.upgrade(bpf_objects["lb"])
        assert (act.pin_dir / SEED_MAP).exists() and act.hash_seed() == LEGACY_SEED
        table = act.table().slots
        picked = _choices(lib, act)[:500]
        assert picked == [table[flow_hash(s, "192.0.2.10", 17, p, 80, seed=LEGACY_SEED) % len(table)]
                          for s, p in FLOWS[:500]]
    finally:
        act.unload()
    assert not (bpffs / "lb").exists()


@pytest.fixture
def mounted_pin_dir(bpffs: Path, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(host directory on bpffs, its bind mount elsewhere): how k8s/ mounts the pin directory in pods."""
    host = bpffs / "gpu-capacity-predictor"
    host.mkdir()
    mounted = tmp_path / "pods-view" / "gpu-capacity-predictor"
    mounted.mkdir(parents=True)
    proc = subprocess.run(["mount", "--bind", str(host), str(mounted)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot bind-mount: {proc.stderr.strip()}")
    try:
        yield host, mounted
    finally:
        subprocess.run(["umount", "-l", str(mounted)], check=False)


@pytest.mark.root
def test_load_and_unload_through_a_mounted_pin_directory(
    mounted_pin_dir: tuple[Path, Path], dummies: tuple, lib: Libbpf, bpf_objects: dict
) -> None:
    host, mounted = mounted_pin_dir
    front, targets = dummies
    act = xdp.load(front, targets[:2], mounted, mode="skb", obj_path=bpf_objects["lb"], lib=lib)
    assert (host / "prog").exists() and (host / SEED_MAP).exists()  # pins land on the host's bpffs
    act.unload()
    assert mounted.is_dir() and host.is_dir()  # a mount point cannot go: only the pins do
    assert list(host.iterdir()) == []


def _settings(pin_dir: Path, inputs: Path, **kw: object) -> AgentSettings:
    return AgentSettings.model_validate(
        {"node": "node-a", "pin_dir": pin_dir, "inputs": inputs, "dry_run": False, "interval_s": 60, **kw}
    )


def _write_inputs(path: Path, targets: list[str]) -> None:
    path.write_text(json.dumps({
        "generated_at": (datetime.now(UTC) - timedelta(seconds=30)).isoformat(),
        "targets": [{"iface": t, "capacity_bps": 100e9, "forecast_bps": 10e9} for t in targets],
    }))


def _holding(registry: CollectorRegistry) -> dict[str, float]:
    text = generate_latest(registry).decode()
    out = {}
    for reason in HOLD_REASONS:
        line = next(x for x in text.splitlines() if x.startswith(f'predictor_xdp_agent_holding{{node="node-a",reason="{reason}"}}'))
        out[reason] = float(line.rsplit(" ", 1)[1])
    return out


@pytest.mark.root
def test_agent_holds_until_the_load_job_ran_then_acts(
    bpffs: Path, dummies: tuple, tmp_path: Path, lib: Libbpf, bpf_objects: dict
) -> None:
    front, targets = dummies
    pin = bpffs / "lb"
    inputs = tmp_path / "inputs.json"
    _write_inputs(inputs, targets[:2])
    settings = _settings(pin, inputs, max_cycles=5)
    actuator = xdp.XdpActuator(pin, lib)
    state = AgentState()
    registry = CollectorRegistry()
    registry.register(XdpStatsCollector(actuator, "node-a", state))
    scrapes: list[dict[str, float]] = []
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:  # what happens on the node between two agent cycles
        sleeps.append(seconds)
        scrapes.append(_holding(registry))
        if len(sleeps) == 3:  # the operator's load Job runs
            xdp.load(front, targets[:2], pin, mode="skb", obj_path=bpf_objects["lb"], lib=lib)

    try:
        results = list(run_agent(settings, actuator, sleep=sleep, state=state))
        lines = list(log_lines(results))
        up = generate_latest(registry).decode()
    finally:
        if pin.exists():
            actuator.unload()
    assert [r.hold for r in results] == ["not_loaded"] * 3 + [None, None]
    assert sleeps == [60] * 4  # retried on its interval, never exited
    assert "no XDP load balancer is pinned" in (results[0].error or "")
    # One log line for the whole hold, then one per cycle that ran.
    assert [r.hold for r in lines] == ["not_loaded", None, None]
    assert lines[1].applied and lines[1].profile and lines[2].changes == []
    assert scrapes[0] == {r: float(r == "not_loaded") for r in HOLD_REASONS}
    assert _holding(registry) == dict.fromkeys(HOLD_REASONS, 0.0)
    assert 'predictor_xdp_up{node="node-a"} 1.0' in up


@pytest.mark.root
def test_agent_holds_when_the_inputs_name_a_target_that_is_not_loaded(
    lb: tuple, dummies: tuple, tmp_path: Path
) -> None:
    actuator, _ = lb
    inputs = tmp_path / "inputs.json"
    _write_inputs(inputs, ["gcpx-no-such-if", dummies[1][0]])
    (result,) = run_agent(_settings(actuator.pin_dir, inputs, max_cycles=1), actuator)
    assert result.hold == "apply_failed" and "not a loaded target" in (result.error or "")
    assert actuator.status().active_profile is None  # nothing was switched


def test_agent_without_bpffs_holds_as_unsupported_and_logs_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Runs as any user: not root, or root on a directory that is not bpffs, is the same hold."""
    config = tmp_path / "agent.yaml"
    config.write_text(f"node: node-a\npin_dir: {tmp_path / 'lb'}\ninputs: {tmp_path / 'in.json'}\n"
                      "max_cycles: 3\ninterval_s: 0.01\n")
    assert main(["xdp", "agent", "--agent-config", str(config)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1, out  # three cycles, one state: one line
    assert json.loads(out[0])["hold"] == "unsupported"


def test_agent_metrics_listen_where_configured(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert AgentSettings.model_fields["metrics_address"].default == "127.0.0.1"  # host network: not 0.0.0.0
    config = tmp_path / "agent.yaml"
    config.write_text(f"node: n\npin_dir: {tmp_path / 'lb'}\ninputs: {tmp_path / 'in.json'}\n"
                      "metrics_port: 9402\nmetrics_address: 203.0.113.9\n")  # TEST-NET-3: no local address
    assert main(["xdp", "agent", "--agent-config", str(config)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: cannot serve /metrics on 203.0.113.9:9402") and "\n" not in err
