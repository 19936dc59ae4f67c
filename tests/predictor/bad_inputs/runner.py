"""The one check every bad-input case makes, and the shape of a case.

Each case runs the real CLI (``predictor.cli.main``) in-process and checks what a user relies on: exactly
one line on stderr naming the problem, exit code 1, and no file written outside the output directory.
Each command group's module holds its ``CASES`` and parametrizes ``run_case`` over them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from predictor.cli import main
from tests.predictor.bad_inputs.inputs import Files

__all__ = ["Case", "ids", "params", "run_case"]


class Case(NamedTuple):
    name: str
    args: Callable[[Files], list[str]]
    spoil: Callable[[Files], None] | None
    says: str


def params(cases: list[Case]) -> list[tuple[Callable[[Files], list[str]], Callable[[Files], None] | None, str]]:
    return [(c.args, c.spoil, c.says) for c in cases]


def ids(cases: list[Case]) -> list[str]:
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), "two cases share a name"
    return names


def _files_under(root: Path) -> set[Path]:
    return set(root.rglob("*"))


def run_case(
    files: Files,
    capsys: pytest.CaptureFixture[str],
    args: Callable[[Files], list[str]],
    spoil: Callable[[Files], None] | None,
    says: str,
) -> None:
    """Spoil one input, run the command: exit 1, one ``error:`` line holding ``says``, no stray file."""
    if spoil is not None:
        spoil(files)
    root = files["out"].parent
    before = _files_under(root)
    code = main(args(files))
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert says.lower() in lines[0].lower(), lines[0]
    stray = {p for p in _files_under(root) - before if files["out"] not in p.parents and p != files["out"]}
    assert stray == set()
    assert not (root.parent / "escaped.yaml").exists() and not Path("/tmp/g19-abs-escaped.yaml").exists()
