"""``predictor train``: the group of training commands, each defined in its own module.

The group lists ``TRAIN_COMMANDS`` and imports a training command's module only when it runs.
"""

from __future__ import annotations

import typer

from predictor.commands import TRAIN_COMMANDS
from predictor.commands._lazy import lazy_group

__all__ = ["train_app"]

train_app = typer.Typer(
    cls=lazy_group("TrainGroup", TRAIN_COMMANDS),
    help="Train a model family, backtest it and register it in MLflow.",
    no_args_is_help=True,
)
