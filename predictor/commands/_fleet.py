"""What the history-reading commands share about the fleet: ``--cluster`` and the ``cluster`` column.

With no clusters in the settings a command reads today's single Prometheus and writes today's output
unchanged (no ``cluster`` column); with clusters listed it reads each one (``--cluster`` narrows) and every
row it writes names its cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from predictor.config import Settings
    from predictor.sources.clusters import ClusterSource

__all__ = ["CLUSTER_COLUMN", "ClusterOpt", "check_cluster_option", "fleet", "with_cluster"]

CLUSTER_COLUMN = "cluster"
ClusterOpt = Annotated[
    list[str] | None,
    typer.Option("--cluster", help="Only this cluster of the settings' clusters (repeatable; default: all)."),
]


def fleet(settings: Settings, only: list[str] | None) -> list[ClusterSource]:
    """The clusters to read (one unnamed cluster when the settings list none)."""
    from predictor.sources.clusters import cluster_sources

    return cluster_sources(settings, only=only or None)


def check_cluster_option(settings: Settings, only: list[str] | None, history: Path | None = None) -> None:
    """A one-line error for a ``--cluster`` the settings do not list, before any other option is checked,
    and for ``--cluster`` with ``--history``: the file is read whole, so the option would be silently ignored."""
    from predictor.errors import InputError
    from predictor.sources.clusters import check_names

    check_names(settings, only)
    if only and history is not None:
        raise InputError(
            f"--cluster {' '.join(only)} with --history {history}: --cluster picks the clusters "
            "read from Prometheus; a --history file is read whole"
        )


def with_cluster(frame: pd.DataFrame, cluster: str | None) -> pd.DataFrame:
    """``frame`` with a leading ``cluster`` column for a named cluster; unchanged for the unnamed one."""
    if cluster is None:
        return frame
    return frame.drop(columns=[CLUSTER_COLUMN], errors="ignore").assign(**{CLUSTER_COLUMN: cluster})[
        [CLUSTER_COLUMN, *(c for c in frame.columns if c != CLUSTER_COLUMN)]
    ]
