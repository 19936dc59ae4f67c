"""The ``predictor`` command: one Typer app, command groups registered from ``predictor.commands``.

A known error (``PredictorError``) becomes one line on stderr and exit code 1; a traceback is shown only
with ``--debug``. This is the only module (with ``predictor.commands``) allowed to import ``pipelines``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from predictor import __version__
from predictor.commands import (
    data,
    demand,
    demo,
    diagnose,
    forecast,
    loop,
    replay,
    report,
    retrain,
    rightsize,
    rollback,
    simulate,
    xdp,
)
from predictor.commands._common import CliState, console, err_console
from predictor.errors import PredictorError

__all__ = ["app", "main"]

app = typer.Typer(
    name="predictor",
    help="GPU demand prediction and capacity planning for Kubernetes clusters scheduled by Volcano.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
train_app = typer.Typer(help="Train a model family, backtest it and register it in MLflow.", no_args_is_help=True)
app.add_typer(train_app, name="train")


@app.callback()
def _global_options(
    ctx: typer.Context,
    config: Annotated[
        Path | None, typer.Option("--config", help="YAML settings file (PREDICTOR_… variables override it).")
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
) -> None:
    ctx.obj = CliState(config=config, debug=debug)


@app.command()
def version() -> None:
    """Print the installed version."""
    console.print(f"gpu-capacity-predictor {__version__}")


for _module in (
    data,
    demo,
    xdp,
    simulate,
    replay,
    forecast,
    retrain,
    loop,
    rollback,
    demand,
    rightsize,
    diagnose,
    report,
):
    _module.register(app, train_app)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: run the app, turning known errors into one line and exit 1."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        result = app(args=args, prog_name="predictor", standalone_mode=False)
        if isinstance(result, int):
            return result
    except PredictorError as exc:
        if debug:
            raise
        err_console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        return 1
    except typer.Abort:
        err_console.print("aborted", markup=False)
        return 130
    except typer.Exit as exc:
        return int(exc.exit_code)
    except SystemExit as exc:
        return int(exc.code or 0)
    except typer.TyperException as exc:  # usage errors: unknown option, missing value, ...
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            err_console.print(f"error: {exc}", markup=False)
        return int(getattr(exc, "exit_code", 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
