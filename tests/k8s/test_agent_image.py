"""The slim agent image (Dockerfile target ``agent``): what it installs is enough for what it runs.

No Docker engine here, so the image's Python environment is reproduced in a child interpreter: every
import outside the standard library, this project's ``predictor`` package and the distributions that
``requirements-agent.txt`` pulls in (with their own dependencies) fails as it would in the image. The
agent's commands then run for real: ``collect`` against the simulated NVML, ``xdp agent`` holding with
/metrics served, and ``xdp``'s loader commands parse their flags.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.agent_rss import free_port
from tests.k8s.manifests import REPO

REQUIREMENTS = REPO / "requirements-agent.txt"
FAKE_PYNVML = REPO / "tests" / "support" / "fake_pynvml"

# Runs `predictor ARGS` where a module installed in site-packages imports only if its top-level name is
# ALLOWED (the standard library and this checkout import as usual; pipelines/ and models/ are refused:
# they need the ML stack, except models.durations, the pure duration grammar the agents parse flags with).
PROBE = """
import importlib.machinery, json, runpy, sys, sysconfig
allowed, args = set(sys.argv[1].split(",")), sys.argv[2:]
site = tuple({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})

class AgentImageOnly:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in allowed or name in ("models", "models.durations"):
            return None
        if top not in ("pipelines", "models"):
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            places = [] if spec is None else [spec.origin or "", *(spec.submodule_search_locations or [])]
            if not any(str(place).startswith(site) for place in places):
                return None  # standard library, built in, this checkout, or missing anyway
        raise ModuleNotFoundError(f"No module named {name!r} (not in the agent image)", name=top)

sys.meta_path.insert(0, AgentImageOnly())
sys.argv = ["predictor", *args]
try:
    runpy.run_module("predictor.cli", run_name="__main__")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"code": code}), file=sys.stderr)
"""


def _requirement_names(lines: list[str]) -> list[str]:
    names = []
    for line in lines:
        text = line.split("#", 1)[0].strip()
        if text:
            match = re.match(r"[A-Za-z0-9_.-]+", text)
            assert match, line
            names.append(match.group(0))
    return names


def _closure(names: list[str]) -> set[str]:
    """Distributions installed by ``pip install`` of ``names`` (extras left out)."""
    seen: set[str] = set()
    todo = [n.lower().replace("_", "-") for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:  # a platform-only dependency (colorama on Windows): not here either
            continue
        for requirement in requires:
            if "extra ==" in requirement:
                continue
            todo.extend(n.lower().replace("_", "-") for n in _requirement_names([requirement.split(";")[0]]))
    return seen


def _allowed_modules() -> set[str]:
    names = _requirement_names(REQUIREMENTS.read_text(encoding="utf-8").splitlines())
    dists = _closure(names)
    modules = {
        module
        for module, owners in md.packages_distributions().items()
        if any(o.lower().replace("_", "-") in dists for o in owners)
    }
    return modules | {"predictor"}


def _run_in_agent_image(*args: str, timeout: float = 120) -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKE_PYNVML), str(REPO)])}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(sorted(_allowed_modules())), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env=env,
        timeout=timeout,
    )
    lines = done.stderr.strip().splitlines()
    code = json.loads(lines[-1])["code"] if lines and lines[-1].startswith("{") else -1
    return code, done.stdout, done.stderr


def test_the_agent_requirements_are_project_dependencies_with_the_same_bounds() -> None:
    declared = {r.split(";")[0].strip() for r in md.requires("gpu-capacity-predictor") or [] if "extra ==" not in r}
    for line in REQUIREMENTS.read_text(encoding="utf-8").splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement:
            assert requirement.replace(" ", "") in {d.replace(" ", "") for d in declared}, requirement


def test_the_requirements_leave_out_the_ml_stack() -> None:
    allowed = _allowed_modules()
    assert not {"torch", "pandas", "sklearn", "mlflow", "numpy", "kubernetes"} & allowed


def test_collect_scrapes_the_simulated_nvml_in_the_agent_image() -> None:
    code, out, err = _run_in_agent_image("collect", "--once")
    assert code == 0, err
    assert out.count("DCGM_FI_DEV_GPU_UTIL{") == 8


def test_the_xdp_agent_runs_and_holds_in_the_agent_image(tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(
        f"node: node-a\npin_dir: {tmp_path}/pins\ninputs: {tmp_path}/node-a.json\ninterval_s: 0.2\n"
        f"max_cycles: 2\ndry_run: true\nmetrics_port: {free_port()}\nmetrics_address: 127.0.0.1\n",
        encoding="utf-8",
    )
    code, out, err = _run_in_agent_image("xdp", "agent", "--agent-config", str(config))
    assert code == 0, err
    cycles = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert cycles and all(c["hold"] for c in cycles)  # no bpffs here: it holds, as before the loader Job ran


@pytest.mark.parametrize("command", ["load", "set-profile", "status", "upgrade", "unload", "agent"])
def test_every_xdp_command_starts_in_the_agent_image(command: str) -> None:
    code, out, err = _run_in_agent_image("xdp", command, "--help")
    assert code == 0, err
    assert f"predictor xdp {command}" in out


def test_other_commands_say_in_one_line_that_the_image_lacks_them() -> None:
    code, _, err = _run_in_agent_image("simulate", "--help")
    assert code == 1
    message = err.strip().splitlines()[0]
    assert message.startswith("error: `predictor simulate` needs the Python package")
    assert "Traceback" not in err
