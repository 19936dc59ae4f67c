"""What every command shares: the global options and how settings are built from them.

The settings model is imported when settings are built: the node agents (``collect``, ``xdp agent``)
print with these consoles but never read the planner's settings, which pull in pandas.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

if TYPE_CHECKING:
    from predictor.config import Settings

__all__ = ["CliState", "console", "err_console", "settings_from"]

console = Console()
err_console = Console(stderr=True)


@dataclass
class CliState:
    """Global options given before the command name."""

    config: Path | None = None
    debug: bool = False


def settings_from(ctx: typer.Context, *, config: Path | None = None, **overrides: Any) -> Settings:
    """Settings from ``--config``, the environment and explicit flags (``None`` values are dropped).

    ``config`` is a command's own ``--config`` (``plan``, ``loop``): the same settings file as the global
    option, which it replaces when both are given. A deprecated settings key is reported as one line.
    """
    from predictor.config import DeprecatedSettingWarning, load_settings

    state: CliState = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    cleaned = {section: {k: v for k, v in values.items() if v is not None} for section, values in overrides.items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DeprecatedSettingWarning)
        settings = load_settings(config or state.config, **{k: v for k, v in cleaned.items() if v})
    for warning in caught:
        if issubclass(warning.category, DeprecatedSettingWarning):
            err_console.print(f"warning: {warning.message}", markup=False, highlight=False, soft_wrap=True)
        else:  # not ours to reword: hand it back to the normal warning machinery
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return settings
