"""The layers contract in pyproject.toml names every top-level part of the project, so none escapes it.

import-linter checks only the modules a layers contract names: a new ``predictor.<x>`` left out of it
could import anything. This test makes adding a package also mean placing it in a layer.
"""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path

import predictor

ROOT = Path(__file__).resolve().parents[2]


def _layered_modules() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    return {name.strip().strip("()") for layer in layers for name in layer.replace(":", "|").split("|")}


def test_every_top_level_part_sits_in_a_layer() -> None:
    parts = {f"predictor.{m.name}" for m in pkgutil.iter_modules(predictor.__path__)} | {"pipelines", "models"}
    assert sorted(parts - _layered_modules()) == []


def test_replay_sits_above_the_simulator_and_the_planner_it_drives() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = [c["layers"] for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    index = {name.strip(): i for i, layer in enumerate(layers) for name in layer.split("|")}
    assert index["predictor.replay"] < index["predictor.sim"] < index["predictor.planner"]
    assert index["predictor.reports"] < index["predictor.replay"]  # the report's what-if replays
