"""The README's command table and make targets are the ones that exist, so a quick start cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

import typer.main

from predictor.cli import app

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _table_commands() -> dict[str, set[str]]:
    """``predictor NAME`` (with ``a|b`` sub-commands) from the first cell of each row of the Commands table."""
    section = README.split("## Commands", 1)[1].split("\n## ", 1)[0]
    listed: dict[str, set[str]] = {}
    for row in section.splitlines():
        if not row.startswith("| `predictor "):
            continue
        for name, subs in re.findall(r"`predictor ([\w-]+)((?: [\w\\|-]+)?)", row.split(" | ")[0]):
            words = subs.strip().split(" ")[0] if subs.strip() else ""
            listed.setdefault(name, set()).update(w for w in words.split("\\|") if w and not w.startswith("-"))
    return listed


def test_the_command_table_lists_every_command_and_sub_command() -> None:
    cli = typer.main.get_command(app)
    listed = _table_commands()
    assert sorted(listed) == sorted(cli.commands)  # type: ignore[attr-defined]
    for group in ("train", "xdp"):
        sub = cli.load_command(None, group)  # type: ignore[attr-defined]  # the lazy group imports it here
        assert listed[group] == set(sub.commands), group


def test_every_make_target_the_readme_names_exists() -> None:
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(encoding="utf-8"), flags=re.MULTILINE))
    named = set(re.findall(r"`?make ([\w-]+)", README))
    assert named, "the README names no make target"
    assert named <= targets
