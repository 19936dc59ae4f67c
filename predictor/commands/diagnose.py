"""CLI: ``predictor diagnose`` (why is this job slow?) and ``predictor train rca``.

Thin (no logic of its own): parse flags, read the window from Prometheus or a history file, load the model (bundled
default, ``--model FILE`` or ``gpu-rca@champion`` from ``--registry``), call ``predictor.diagnose`` and
write the JSON atomically.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from predictor.atomicio import write_text
from predictor.commands._common import console, settings_from
from predictor.commands._fleet import ClusterOpt, check_cluster_option, fleet
from predictor.commands._options import HistoryOption, IncidentHistoryOption, PrometheusUrlOption
from predictor.errors import InputError

__all__ = ["diagnose_cmd", "diagnose_cmd_epilog", "train_rca_cmd"]

# Prometheus refuses a range query of more points than this per series.
MAX_POINTS = 11_000
CAUSES_MD = Path(__file__).resolve().parents[1] / "diagnose" / "CAUSES.md"


def diagnose_cmd_epilog() -> str:
    """``predictor diagnose --help``'s epilog: which families each cause needs, per profile (``CAUSES.md``)."""
    try:
        return CAUSES_MD.read_text(encoding="utf-8")
    except OSError:
        return "Which metric families each cause needs: predictor/diagnose/CAUSES.md (missing in this install)."


def _write_json(payload: object, out: Path) -> None:
    write_text(out, json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


def diagnose_cmd(
    ctx: typer.Context,
    at: Annotated[str, typer.Option("--at", help="End of the window, ISO 8601 (naive = UTC).")],
    out: Annotated[Path, typer.Option("--out", help="Output JSON file.")],
    prometheus_url: PrometheusUrlOption = None,
    history: HistoryOption = None,
    window: Annotated[str, typer.Option("--window", help="Window length, e.g. 15m.")] = "15m",
    scope: Annotated[
        str | None, typer.Option("--scope", help="Only this scope: node=X, gpu=N, job=J or queue=Q.")
    ] = None,
    model: Annotated[
        Path | None, typer.Option("--model", help="Model JSON file (from `predictor train rca --save`).")
    ] = None,
    registry: Annotated[
        str | None, typer.Option("--registry", help="MLflow tracking URI: use gpu-rca@champion from it.")
    ] = None,
    step: Annotated[str, typer.Option("--step", help="Query step against Prometheus.")] = "1m",
    cluster: ClusterOpt = None,
) -> None:
    """Name the likely cause of a slowdown in a window: cause, probability, scope, explanation.

    With clusters in the settings (and no --history), diagnoses each cluster (or each --cluster): every
    finding names its cluster, and "clusters" holds each one's families found and missing."""
    from predictor.diagnose.engine import diagnose, fetch_window, history_window, parse_scope
    from predictor.diagnose.fleet import fleet_findings
    from predictor.diagnose.models import load_default, load_model_file, load_registry
    from predictor.sources.files import read_frame
    from predictor.timeparse import parse_duration, parse_time

    settings = settings_from(ctx, prometheus={"url": prometheus_url}, mlflow={"tracking_uri": registry})
    check_cluster_option(settings, cluster, history)
    if (prometheus_url is None) == (history is None) and not (history is None and settings.clusters):
        raise InputError("give exactly one of --prometheus-url URL or --history FILE")
    if model is not None and registry is not None:
        raise InputError("give at most one of --model PATH or --registry URI")
    at_ts = parse_time(at, name="--at")
    window_td = parse_duration(window, name="--window")
    scope_filter = parse_scope(scope)
    if model is not None:
        tree = load_model_file(model)
    elif registry is not None:
        tree = load_registry(settings.mlflow)
    else:
        tree = load_default()
    if history is not None:
        result = diagnose(history_window(read_frame(history), at_ts, window_td), tree, at_ts, window_td, scope_filter)
    else:
        step_td = parse_duration(step, name="--step")
        points = 2 * window_td / step_td  # the query reaches back two windows (the preceding one is the baseline)
        if points > MAX_POINTS:
            raise InputError(
                f"--step {step} with --window {window}: {points:,.0f} points per series, above Prometheus' "
                f"{MAX_POINTS:,d}; use a longer --step"
            )
        result = fleet_findings(
            {
                c.name: diagnose(
                    fetch_window(c.source, at_ts, window_td, step_td), tree, at_ts, window_td, scope_filter
                )
                for c in fleet(settings, cluster)
            }
        )
    _write_json(result, out)
    top = result["findings"][0]
    where = ", ".join(f"{k}={v}" for k, v in top["scope"].items() if v) or "cluster"
    where = where if "cluster" not in top else f"{where} in cluster {top['cluster']}"
    console.print(
        f"{top['cause']} ({top['probability']:.2f}) at {where}; {len(result['findings'])} finding(s) written to {out}",
        highlight=False,
        markup=False,
    )


def train_rca_cmd(
    ctx: typer.Context,
    save: Annotated[
        Path | None, typer.Option("--save", help="Also write the fitted model as JSON to this file.")
    ] = None,
    incidents: Annotated[
        Path | None,
        typer.Option(
            "--incidents",
            help="Your labelled incidents CSV (time,scope,cause[,window]); default "
            "/etc/predictor/incidents/incidents.csv when it exists. Read with --history, else from Prometheus.",
        ),
    ] = None,
    history: IncidentHistoryOption = None,
    window: Annotated[str, typer.Option("--window", help="Window length, e.g. 15m.")] = "15m",
    cache: Annotated[Path | None, typer.Option("--cache", help="Directory caching simulated labelled windows.")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="One small scenario each (smoke runs).")] = False,
    no_register: Annotated[bool, typer.Option("--no-register", help="Skip MLflow.")] = False,
) -> None:
    """Train a root-cause tree per metric-family profile (simulator + your incidents), log to MLflow `gpu-rca`."""
    from pipelines.rca import RcaJob, train_rca
    from predictor.timeparse import parse_duration

    settings = settings_from(ctx)
    job = RcaJob(
        window=parse_duration(window, name="--window"),
        incidents=incidents,
        history=history,
        cache_dir=cache,
        quick=quick,
        register=not no_register,
        save=save,
    )
    outcome = train_rca(settings, job)
    console.print(outcome.summary(), highlight=False, markup=False)
