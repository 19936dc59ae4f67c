"""``predictor demo``: the README's main job on embedded defaults (no cluster needed).

Stages run in order; each stage is a function that reports what it wrote. Stages whose issue has not
landed yet say so instead of pretending to run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from predictor.commands._common import console

__all__ = ["register"]

PENDING_STAGES = (
    ("simulate history", "trace-driven simulator (issue 3)"),
    ("train forecasts", "forecasters and backtests (issue 4)"),
    ("train demand regressors", "right-sizing models (issue 5)"),
    ("train root-cause tree", "root-cause models (issue 6)"),
    ("plan queues", "scheduling loop and Volcano actuator (issue 7)"),
    ("plan XDP profile", "XDP actuator (issue 8)"),
    ("write report", "quota reports (issue 9)"),
)


def register(app: typer.Typer, train: typer.Typer) -> None:
    @app.command()
    def demo(
        out: Annotated[Path, typer.Option("--out", help="Directory for everything the demo writes.")] = Path(
            "demo-out"
        ),
    ) -> None:
        """Run the main job end to end on embedded defaults: simulate, train, plan, report."""
        out.mkdir(parents=True, exist_ok=True)
        table = Table(title="predictor demo", show_lines=False)
        table.add_column("stage")
        table.add_column("status")
        for stage, owner in PENDING_STAGES:
            table.add_row(stage, f"not built yet: {owner}")
        console.print(table)
        console.print(f"output directory: {out.resolve()}")
