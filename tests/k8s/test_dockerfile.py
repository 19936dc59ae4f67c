"""Static checks of the Dockerfile (no Docker engine here): the properties the manifests depend on.

The manifests run the image as UID 10001 with a read-only root filesystem and `runAsNonRoot`, call the
``predictor`` entry point with arguments only, and the node agent needs the built XDP object and libbpf.
The node agent runs the slim ``agent`` target, which must stay free of the ML stack.
"""

from __future__ import annotations

import re

from tests.k8s.manifests import REPO

DOCKERFILE = (REPO / "Dockerfile").read_text(encoding="utf-8")
INSTRUCTIONS = [
    line.strip()
    for line in re.sub(r"\\\n", " ", DOCKERFILE).splitlines()
    if line.strip() and not line.lstrip().startswith("#")
]


def _stages() -> list[list[str]]:
    stages: list[list[str]] = []
    for line in INSTRUCTIONS:
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def _named_stages() -> dict[str, list[str]]:
    named = {}
    for stage in _stages():
        match = re.search(r"\bAS\s+(\S+)", stage[0], re.IGNORECASE)
        if match:
            named[match.group(1)] = stage
    return named


def test_multi_stage_with_a_lean_non_root_runtime() -> None:
    stages = _named_stages()
    assert list(stages) == ["bpf", "build", "agent-build", "agent", "runtime"]  # runtime last: the default
    for name, venv in (("runtime", "--from=build /opt/venv"), ("agent", "--from=agent-build /opt/venv")):
        image = stages[name]
        assert any(line == "USER 10001:10001" for line in image), f"{name} must end as numeric UID 10001"
        assert not any(line.startswith(("COPY . ", "ADD ")) for line in image), f"{name} copies build outputs only"
        assert any(venv in line for line in image)
        assert any("--from=bpf" in line for line in image)
        assert any("libbpf1" in line for line in image)
        assert any("PREDICTOR_XDP_OBJECT=/opt/predictor/bpf/xdp_lb.o" in line for line in image)
        assert any(line.startswith('ENTRYPOINT ["predictor"]') for line in image)


def test_the_agent_image_installs_its_requirements_and_not_the_ml_stack() -> None:
    build = " ".join(_named_stages()["agent-build"])
    assert "pip install -r requirements-agent.txt" in build
    assert "pip install --no-deps ." in build  # the project without torch, pandas, scikit-learn, mlflow
    assert "torch" not in build
    assert "predictor collect --help" in build and "predictor xdp agent --help" in build
    ignored = set((REPO / ".dockerignore").read_text(encoding="utf-8").split())
    assert "requirements-agent.txt" not in ignored


def test_cpu_torch_by_default_with_a_cuda_build_argument() -> None:
    assert re.search(r"^ARG TORCH_INDEX_URL=https://download\.pytorch\.org/whl/cpu$", DOCKERFILE, re.MULTILINE)
    install_torch = next(line for line in INSTRUCTIONS if "torch==" in line)
    assert "${TORCH_INDEX_URL}" in install_torch
    # torch is installed before the project so that resolving the project keeps that build.
    assert INSTRUCTIONS.index(install_torch) < INSTRUCTIONS.index("RUN pip install . && pip check")


def test_no_floating_base_images() -> None:
    for line in INSTRUCTIONS:
        if line.upper().startswith(("FROM ", "ARG PYTHON_IMAGE")):
            assert ":latest" not in line and (":" in line or "${" in line), line


def test_the_agent_finds_its_bpf_object_and_libbpf() -> None:
    assert "PREDICTOR_XDP_OBJECT=/opt/predictor/bpf/xdp_lb.o" in DOCKERFILE
    assert "libbpf1" in DOCKERFILE


def test_dockerignore_keeps_the_context_small() -> None:
    ignored = set((REPO / ".dockerignore").read_text(encoding="utf-8").split())
    assert {".git", ".venv", "tests", "bpf/build", "mlruns"} <= ignored
