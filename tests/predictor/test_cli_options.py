"""Shared flags mean one thing everywhere: ``--history``, ``--prometheus-url``, ``--tracking-uri`` and a
command's own ``--config`` come from ``predictor.commands._options``, with the same words in every help."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, get_args

from typer.core import TyperGroup

from predictor.commands import COMMANDS, TRAIN_COMMANDS, _options

SHARED = ("--history", "--prometheus-url", "--tracking-uri", "--config")
# Documented exceptions: demo's two flags choose between its embedded defaults and a real service, and
# `xdp agent --config` is the deprecated alias of --agent-config, not a settings file.
EXCEPTIONS = {("demo", "--prometheus-url"), ("demo", "--tracking-uri"), ("xdp agent", "--config")}


def _declared() -> dict[str, set[str]]:
    helps: dict[str, set[str]] = {flag: set() for flag in SHARED}
    for name in _options.__all__:
        info = get_args(getattr(_options, name))[1]
        # in Annotated, typer reads the option's first positional argument ("--history") as its name
        flag = info.param_decls[0] if info.param_decls else info.default
        helps[flag].add(info.help)
    return helps


def _commands() -> Iterator[tuple[str, Any]]:
    for prefix, entries in (("", COMMANDS), ("train ", TRAIN_COMMANDS)):
        for entry in entries:
            command = entry.load()
            if isinstance(command, TyperGroup):
                for sub in command.list_commands(None):  # type: ignore[arg-type]
                    yield f"{prefix}{entry.name} {sub}", command.get_command(None, sub)  # type: ignore[arg-type]
            else:
                yield f"{prefix}{entry.name}", command


def test_shared_flags_use_the_shared_declarations() -> None:
    declared = _declared()
    seen: dict[str, int] = dict.fromkeys(SHARED, 0)
    for name, command in _commands():
        for param in command.params:
            flag = next((o for o in getattr(param, "opts", []) if o in SHARED), None)
            if flag is None or (name, flag) in EXCEPTIONS:
                continue
            seen[flag] += 1
            assert param.help in declared[flag], f"predictor {name} {flag}: declare it in predictor.commands._options"
    assert seen["--history"] >= 8 and seen["--prometheus-url"] >= 5
