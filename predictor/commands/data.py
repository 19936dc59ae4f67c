"""Placeholder: data commands."""

from __future__ import annotations

import typer


def register(app: typer.Typer, train: typer.Typer) -> None:
    """Add data commands."""
