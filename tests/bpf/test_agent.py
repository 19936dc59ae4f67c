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
        assert main(["xdp", "agent", "--config", str(config)]) == 0
        cycle = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert cycle["applied"] and cycle["profile"] == "node-a-spare"
        status = act.status()
        assert status.weights[targets[0]] > status.weights[targets[1]] > 0 and not status.observe

        assert main(["xdp", "agent", "--config", str(config)]) == 0  # same inputs: nothing to do
        assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["changes"] == []

        write_inputs(inputs, targets[:2], 7200, [10e9, 50e9])  # stale forecasts: observe only
        assert main(["xdp", "agent", "--config", str(config)]) == 0
        capsys.readouterr()
        assert act.status().observe

        inputs.unlink()  # unreadable inputs hold the current profile and report why
        assert main(["xdp", "agent", "--config", str(config)]) == 0
        cycle = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert cycle["changes"] == [] and "cannot read forecast inputs" in cycle["error"]
    finally:
        act.unload()


def test_agent_bad_config_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("node: n\npin_dir: /x\ninputs: /y\ninterval_s: -1\n")
    assert main(["xdp", "agent", "--config", str(config)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: invalid agent config") and "interval_s" in err and "\n" not in err
