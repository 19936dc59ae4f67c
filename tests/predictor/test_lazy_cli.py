"""The CLI starts light: the node agents' commands never import the ML stack, and help stays complete.

``predictor collect`` and ``predictor xdp agent`` run in a DaemonSet container with a small memory limit;
a command module importing pandas or torch at the top would put ~390 MB back into every agent. Each
check runs the real CLI in a fresh interpreter and reads ``sys.modules`` when it exits.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.core import TyperGroup

from predictor.cli import main
from predictor.commands import COMMANDS, TRAIN_COMMANDS

REPO = Path(__file__).resolve().parents[2]
FAKE_PYNVML = REPO / "tests" / "support" / "fake_pynvml"
HEAVY = ("torch", "pandas", "sklearn", "mlflow", "statsmodels", "matplotlib", "kubernetes", "pipelines")
# models/ holds the estimators; its one pure module the agents use is the duration grammar they share.
LIGHT_MODELS = ("models", "models.durations")

# Runs the CLI as `python -m predictor.cli ARGS` would, then prints which heavy packages got imported.
PROBE = """
import json, runpy, sys
heavy, light, args = sys.argv[1].split(","), sys.argv[2].split(","), sys.argv[3:]
sys.argv = ["predictor", *args]
try:
    runpy.run_module("predictor.cli", run_name="__main__")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
estimators = [m for m in sys.modules if m.split(".")[0] == "models" and m not in light]
loaded = sorted([*(m for m in heavy if m in sys.modules), *estimators])
print(json.dumps({"code": code, "heavy": loaded}), file=sys.stderr)
"""


def _run(*args: str, fake_nvml: bool = False) -> tuple[int, list[str], str]:
    paths = [str(FAKE_PYNVML)] if fake_nvml else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(HEAVY), ",".join(LIGHT_MODELS), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env=env,
        timeout=120,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["code"], report["heavy"], done.stdout


@pytest.mark.parametrize(
    "args",
    [("collect", "--help"), ("xdp", "agent", "--help"), ("xdp", "--help"), ("--help",)],
    ids=["collect", "xdp-agent", "xdp", "root"],
)
def test_agent_commands_and_help_start_without_the_ml_stack(args: tuple[str, ...]) -> None:
    code, heavy, out = _run(*args)
    assert code == 0
    assert "Usage: predictor" in out
    assert heavy == [], f"`predictor {' '.join(args)}` imported {heavy}"


def test_a_collect_scrape_against_the_fake_nvml_stays_light() -> None:
    code, heavy, out = _run("collect", "--once", fake_nvml=True)
    assert code == 0
    assert heavy == []
    util = [line for line in out.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    assert len(util) == 8 and all('modelName="NVIDIA H100 80GB HBM3"' in line for line in util)


def test_root_help_lists_every_command_with_its_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    for entry in COMMANDS:
        assert f"{entry.name} {entry.help.split()[0]}" in out, entry.name
    assert "version Print the installed version." in out


@pytest.mark.parametrize("entry", [*COMMANDS, *TRAIN_COMMANDS], ids=lambda e: e.name)
def test_the_listed_help_is_the_commands_own(entry: object) -> None:
    from predictor.commands._lazy import LazyCommand

    assert isinstance(entry, LazyCommand)
    command = entry.load()
    first = inspect.cleandoc(command.help or "").split("\n\n")[0]
    assert " ".join(first.split()) == entry.help
    if entry.name in ("xdp", "train"):
        assert isinstance(command, TyperGroup)


def test_train_lists_its_commands_without_running_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--help"]) == 0
    out = capsys.readouterr().out
    for entry in TRAIN_COMMANDS:
        assert entry.name in out


def test_a_mistyped_command_is_a_usage_error_naming_the_lazy_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["colect"]) == 2
    assert "No such command 'colect'. Did you mean 'collect'?" in capsys.readouterr().err
