"""What every command shares: the global options and how settings are built from them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from predictor.config import Settings, load_settings

__all__ = ["CliState", "console", "err_console", "settings_from"]

console = Console()
err_console = Console(stderr=True)


@dataclass
class CliState:
    """Global options given before the command name."""

    config: Path | None = None
    debug: bool = False


def settings_from(ctx: typer.Context, **overrides: Any) -> Settings:
    """Settings from ``--config``, the environment and explicit flags (``None`` values are dropped)."""
    state: CliState = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    cleaned = {
        section: {k: v for k, v in values.items() if v is not None}
        for section, values in overrides.items()
    }
    return load_settings(state.config, **{k: v for k, v in cleaned.items() if v})
