"""docs/architecture.md cannot drift from the code: its layer table is the import-linter layers contract,
and every module or path it names exists."""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
# Top-level directories a path on the page may start with; anything else in backticks is not a path.
TOP_DIRS = ("predictor/", "pipelines/", "models/", "tests/", "k8s/", "bpf/", "docs/", "bench/", "scripts/")
MODULE = re.compile(r"^(predictor|pipelines|models)(\.\w+)*$")


def _contract_layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = [c["layers"] for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return [[name.strip() for name in layer.split("|")] for layer in layers]


def _page_layers() -> list[list[str]]:
    """The modules cell of each numbered row of the "Layers" table, in page order."""
    section = PAGE.read_text(encoding="utf-8").split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if re.match(r"\| \d+ \|", line)]
    numbers = [int(row.split("|")[1]) for row in rows]
    assert numbers == list(range(1, len(rows) + 1)), "layer rows must be numbered 1, 2, … top to bottom"
    return [re.findall(r"`([\w.]+)`", row.split("|")[2]) for row in rows]


def _code_spans() -> set[str]:
    return set(re.findall(r"`([^`\n]+)`", PAGE.read_text(encoding="utf-8")))


def test_the_layer_table_is_the_import_linter_contract() -> None:
    assert _page_layers() == _contract_layers(), (
        "the Layers table of docs/architecture.md must list the layers of pyproject.toml's layers contract, "
        "top to bottom, with the same modules in each row"
    )


def _resolves(dotted: str) -> bool:
    """A module, or an attribute (class, function, constant) of one, possibly nested (``Loop.run_once``)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


@pytest.mark.parametrize("dotted", sorted(s for s in _code_spans() if MODULE.match(s)))
def test_every_named_module_exists(dotted: str) -> None:
    assert _resolves(dotted), f"docs/architecture.md names {dotted}, which does not exist"


@pytest.mark.parametrize(
    "path", sorted(s for s in _code_spans() if s.startswith(TOP_DIRS) and " " not in s and "<" not in s)
)
def test_every_named_path_exists(path: str) -> None:
    assert (ROOT / path).exists(), f"docs/architecture.md names {path}, which does not exist"


ON_THE_PATH = (
    *("predictor.sources", "predictor.planner", "predictor.loop", "predictor.actuators", "predictor.registry"),
    *("predictor.reports", "predictor.sim", "predictor.replay", "pipelines", "models"),
)


@pytest.mark.parametrize("package", ON_THE_PATH)
def test_the_data_flow_names_a_module_of_each_package_on_the_path(package: str) -> None:
    flow = PAGE.read_text(encoding="utf-8").split("## Data flow", 1)[1].split("\n## ", 1)[0]
    assert re.search(rf"`{re.escape(package)}(\.\w+)*`", flow), f"the data flow names nothing in {package}"
