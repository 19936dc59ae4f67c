"""CLI commands for this area (placeholder until its issue lands)."""

from __future__ import annotations

import typer

__all__ = ["register"]


def register(app: typer.Typer, train: typer.Typer) -> None:
    """Add this module's commands to the root app and the `train` group."""
