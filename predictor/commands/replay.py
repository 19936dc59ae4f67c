"""``predictor replay``: a job trace through the simulator under one quota policy, one ``summary.json``.

Thin: parse flags, load the job table (the schema of ``predictor simulate --jobs``), call
``predictor.replay.replay`` and write the summary atomically. Bad input is one line (the CLI's handler).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from predictor.commands._common import console
from predictor.errors import InputError
from predictor.timeparse import parse_time

__all__ = ["replay"]

_FORECAST_POLICIES = ("loop", "rightsize+loop", "oracle")

SUMMARY_KEYS = (
    "allocation",
    "utilisation",
    "wait_p50_min",
    "wait_p95_min",
    "preemptions",
    "reclaims",
    "lost_gpu_h",
    "goodput_gpu_h",
    "fragmentation",
)


def replay(
    jobs: Annotated[
        Path,
        typer.Option(
            "--jobs",
            help="Job table (CSV/Parquet), as `predictor simulate --jobs`: "
            "submit_time, queue or vc, num_gpus, duration_s[, workload, priority, "
            "checkpoint_s, restart_s, preemptable]; preemptable false: reclaim and preempt never evict "
            "the job (default true).",
        ),
    ],
    nodes: Annotated[int, typer.Option("--nodes", help="Number of nodes.")],
    start: Annotated[
        str,
        typer.Option(
            "--start",
            help="First replayed instant, ISO 8601 (the week before it "
            "is the warm-up and the static quotas' reference).",
        ),
    ],
    weeks: Annotated[float, typer.Option("--weeks", help="Weeks to replay.")],
    policy: Annotated[
        str,
        typer.Option(
            "--policy",
            help="static-hard, static-elastic, static-weekly, proportion, loop, rightsize+loop or oracle "
            "(oracle is loop with --forecaster oracle).",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Output directory (summary.json).")],
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", help="GPUs per node.")] = 8,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the simulated GPU usage.")] = 0,
    forecaster: Annotated[
        str | None,
        typer.Option(
            "--forecaster",
            help="What loop and rightsize+loop plan from: auto (the forecast job's model, retrained weekly "
            "and served as the loop serves it; the default), naive or oracle (the true future).",
        ),
    ] = None,
    queue_weight: Annotated[
        list[str] | None,
        typer.Option("--queue-weight", help="QUEUE=W: proportion's weight of a queue (an integer; 1 if not given)."),
    ] = None,
) -> None:
    """Replay a job trace under a quota policy and write allocation, waits, reclaim losses and goodput."""
    from predictor.atomicio import check_output_directory, write_text
    from predictor.replay import ReplaySettings
    from predictor.replay import replay as run_replay
    from predictor.sim import load_jobs

    if policy == "oracle" and forecaster not in (None, "oracle"):
        raise InputError(f"--policy oracle plans from the oracle: drop --forecaster {forecaster} or use --policy loop")
    # A flag the policy never reads would otherwise be dropped in silence, and the summary would look like
    # the run it asked for.
    if forecaster is not None and policy not in _FORECAST_POLICIES:
        raise InputError(
            f"--forecaster {forecaster}: --policy {policy} plans from no forecast (only loop and rightsize+loop do)"
        )
    if queue_weight and policy != "proportion":
        raise InputError(f"--queue-weight: only --policy proportion reads queue weights, not --policy {policy}")
    settings = ReplaySettings(
        nodes=nodes,
        start=parse_time(start, name="--start"),
        weeks=weeks,
        policy=policy,
        gpus_per_node=gpus_per_node,
        seed=seed,
        forecaster=forecaster or "auto",
        queue_weights=_weights(queue_weight or []),
    )
    settings.check()
    check_output_directory(out)
    result = run_replay(load_jobs(jobs), settings)
    summary = {k: result.summary[k] for k in SUMMARY_KEYS}
    document = {
        **summary,
        "policy": policy,
        "forecaster": result.forecaster or None,
        "forecaster_retrain_s": result.retrain_s,
        "nodes": nodes,
        "gpus_per_node": gpus_per_node,
        "start": settings.start.isoformat(),
        "weeks": weeks,
        "seed": seed,
        "rightsized_jobs": result.rightsized_jobs,
        "planning_cycles": result.cycles,
        "held_cycles": result.held_cycles,
        "quota_changes": result.quota_changes,
        "fragmentation_of_free": result.summary["fragmentation_of_free"],
    }
    out.mkdir(parents=True, exist_ok=True)
    path = write_text(out / "summary.json", json.dumps(document, indent=2, sort_keys=True) + "\n")
    table = Table(title=f"replay {policy}: {weeks:g} weeks on {nodes * gpus_per_node} GPUs → {path}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key in SUMMARY_KEYS:
        table.add_row(key, f"{summary[key]:,.3f}")
    console.print(table)


def _weights(values: list[str]) -> dict[str, int]:
    """``--queue-weight QUEUE=W`` values as ``{queue: weight}``; a malformed one is one line."""
    out: dict[str, int] = {}
    for value in values:
        queue, sep, weight = value.partition("=")
        if not sep or not queue.strip() or not weight.strip().isdigit() or int(weight) < 1:
            raise InputError(f"--queue-weight {value!r}: expected QUEUE=W with W an integer >= 1")
        if queue.strip() in out:
            raise InputError(f"--queue-weight {value!r}: queue {queue.strip()!r} is given a weight twice")
        out[queue.strip()] = int(weight)
    return out
