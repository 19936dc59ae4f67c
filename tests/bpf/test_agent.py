"""The node agent against a real loaded program: inputs file → planner → atomic switch."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from predictor.actuators import xdp
from predictor.cli import main

pytestmark = pytest.mark.root


def write_inputs(path: Path, targets: list[str], age_s: float, loads: list[float]) -> None:
    generated = datetime.now(UTC) - timedelta(seconds=age_s)
    path.write_text(
        json.dumps(
            {
                "generated_at": generated.isoformat(),
                "targets": [
                    {"iface": t, "capacity_bps": 100e9, "forecast_bps": load}
                    for t, load in zip(targets, loads, strict=True)
                ],
                "distributed_share": 0.2,
            }
        )
    )


def test_agent_applies_the_planned_profile_then_converges(
    capsys: pytest.CaptureFixture[str], bpffs: Path, dummies: tuple, tmp_path: Path, bpf_objects: dict
) -> None:
    front, targets = dummies
    pin = bpffs / "lb"
    act = xdp.load(front, targets[:2], pin, mode="skb", obj_path=bpf_objects["lb"])
    try:
        inputs = tmp_path / "inputs.json"
        config = tmp_path / "agent.yaml"
        config.write_text(f"node: node-a\npin_dir: {pin}\ninputs: {inputs}\ndry_run: false\nmax_cycles: 1\n")

        write_inputs(inputs, targets[:2], 30, [10e9, 50e9])
        assert main(["xdp", "agent", "--agent-config", str(config)]) == 0
        cycle = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert cycle["applied"] and cycle["profile"] == "node-a-spare"
        status = act.status()
        assert status.weights[targets[0]] > status.weights[targets[1]] > 0 and not status.observe

        assert main(["xdp", "agent", "--agent-config", str(config)]) == 0  # same inputs: nothing to do
        assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["changes"] == []

        before = act.status()
        write_inputs(inputs, targets[:2], 7200, [50e9, 10e9])  # stale forecasts: hold what is in force
        assert main(["xdp", "agent", "--agent-config", str(config)]) == 0
        cycle = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert cycle["hold"] == "stale_inputs" and cycle["changes"] == [] and "old" in cycle["error"]
        after = act.status()
        assert (after.active_profile, after.weights, after.observe) == (before.active_profile, before.weights, False)

        write_inputs(inputs, targets[:2], 30, [50e9, 10e9])  # fresh again: the new forecast is applied
        assert main(["xdp", "agent", "--agent-config", str(config)]) == 0
        capsys.readouterr()
        status = act.status()
        assert status.weights[targets[1]] > status.weights[targets[0]] > 0

        inputs.unlink()  # unreadable inputs hold the current profile and report why
        assert main(["xdp", "agent", "--agent-config", str(config)]) == 0
        cycle = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert cycle["changes"] == [] and "cannot read forecast inputs" in cycle["error"]
    finally:
        act.unload()


def test_agent_bad_config_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("node: n\npin_dir: /x\ninputs: /y\ninterval_s: -1\n")
    assert main(["xdp", "agent", "--agent-config", str(config)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: invalid agent config") and "interval_s" in err and "\n" not in err


def test_agent_metrics_report_per_target_packets_from_the_kernel(lb: tuple, dummies: tuple) -> None:
    """The /metrics collector reads the pinned per-CPU counters: what `xdp status` shows, under k8s names."""
    from prometheus_client import CollectorRegistry, generate_latest

    from tests.support.xdp_frames import eth, ipv4, udp
    from predictor.actuators.xdp_metrics import XdpStatsCollector
    from predictor.planner.xdp_types import Profile

    actuator, prog_fd = lb
    _, targets = dummies
    actuator.set_profile(Profile(name="spread", weights=dict(zip(targets, [1, 1, 2, 0], strict=True))))
    for port in range(40_000, 40_200):
        actuator.lib.test_run(prog_fd, eth(ipv4("198.51.100.7", "192.0.2.10", udp(port, 4791))))
    registry = CollectorRegistry()
    registry.register(XdpStatsCollector(actuator, "node-a"))
    text = generate_latest(registry).decode()
    status = actuator.status()
    assert sum(status.stats.values()) == 200
    for target, packets in status.stats.items():
        assert f'target="{target}"' in text and f" {float(packets)}" in text
    assert 'predictor_xdp_up{node="node-a"} 1.0' in text
    assert "predictor_xdp_target_packets_total{" in text
    info = f'iface="{status.iface}",node="node-a",profile="{status.active_profile}"'
    assert f"predictor_xdp_active_profile_info{{{info}}} 1.0" in text


def test_agent_metrics_say_down_when_nothing_is_loaded(bpffs: Path) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from predictor.actuators.xdp_metrics import XdpStatsCollector

    registry = CollectorRegistry()
    registry.register(XdpStatsCollector(xdp.XdpActuator(bpffs / "none"), "node-a"))
    assert 'predictor_xdp_up{node="node-a"} 0.0' in generate_latest(registry).decode()


def test_agent_config_alias_still_reads_the_file_with_a_one_line_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("node: n\npin_dir: /x\ninputs: /y\ninterval_s: -1\n")
    assert main(["xdp", "agent", "--config", str(config)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "deprecated" in err[0] and "--agent-config" in err[0]
    assert err[1].startswith("error: invalid agent config") and "interval_s" in err[1]  # the same file was read
    assert main(["xdp", "agent", "--agent-config", str(config)]) == 1
    assert "deprecated" not in capsys.readouterr().err
    other = tmp_path / "other.yaml"
    assert main(["xdp", "agent", "--agent-config", str(config), "--config", str(other)]) == 2  # which one?
    assert main(["xdp", "agent"]) == 2  # still required
