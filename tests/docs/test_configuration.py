"""docs/configuration.md is the settings models rendered, and what it tells a user to write works."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from predictor.config import load_settings
from predictor.config_reference import render
from predictor.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "configuration.md"


def test_the_committed_reference_is_a_fresh_render() -> None:
    if REFERENCE.read_text(encoding="utf-8") != render():
        pytest.fail("docs/configuration.md differs from the settings models: run `make docs` and commit the file")


def test_every_yaml_example_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the examples name relative paths
    examples = re.findall(r"```yaml\n(.*?)```", render(), flags=re.DOTALL)
    assert len(examples) >= 2
    for number, example in enumerate(examples):
        path = tmp_path / f"example-{number}.yaml"
        path.write_text(example, encoding="utf-8")
        load_settings(path)  # raises ConfigError on an unknown key or a bad value


def _documented_variables() -> list[tuple[str, str, str]]:
    """(section, key, variable) for every table row that names an environment variable."""
    rows = []
    section = ""
    for line in render().splitlines():
        if line.startswith("## "):
            section = line.removeprefix("## ").strip("`")
        match = re.match(r"\| `(\w+)` \| (\w+)[^|]*\|.*\| `(PREDICTOR_\w+)` \|", line)
        if match and match.group(2) in {"int", "float"}:
            rows.append((section, match.group(1), match.group(3)))
    return rows


@pytest.mark.parametrize(("section", "key", "variable"), _documented_variables())
def test_each_documented_variable_reaches_its_key(
    section: str, key: str, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A value no number setting accepts: the error must name the documented key, so the variable is real.
    monkeypatch.setenv(variable, "not-a-number")
    with pytest.raises(ConfigError, match=rf"{re.escape(section)}\.{key}"):
        load_settings()
