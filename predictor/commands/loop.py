"""``predictor plan`` (the planner offline, from kubectl JSON and a forecast file) and ``predictor loop``.

Thin: build settings, wire the readers, forecaster and actuator, call one function, print a summary.
Without ``--config`` the planner's documented defaults apply (see ``predictor.planner.settings``).
"""

from __future__ import annotations

import signal
import threading
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from models.frames import ID, TIME
from predictor.commands import _loop_parts as parts
from predictor.commands._common import console, settings_from
from predictor.commands._options import HistoryOption, SettingsFileOption
from predictor.errors import ConfigError, InputError
from predictor.timeparse import parse_duration, parse_time

if TYPE_CHECKING:  # annotations only: the loop, the actuator and their clients load when a command runs
    import pandas as pd

    from predictor.actuators.volcano import VolcanoActuator
    from predictor.config import Settings
    from predictor.loop import ClusterReader, HistoryReader, Loop, Probed, WorkloadReader
    from predictor.loop.cycle import CycleReport
    from predictor.loop.fleet import FleetLoop
    from predictor.planner import PlannerSettings, QueueState

__all__ = ["loop_command", "plan_command"]


def _summary(title: str, changes: int, held: Counter[str]) -> Table:
    table = Table(title=title)
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("changes", str(changes))
    for code, n in sorted(held.items()):
        table.add_row(f"held: {code}", str(n))
    return table


def _recommendations(report: CycleReport, resource: str) -> Table:
    """Per managed queue: its mode, current and recommended deserved, and what was done or why it was held."""
    assert report.plan is not None
    plan = report.plan
    table = Table(title=f"queues ({resource})")
    for column, justify in (("queue", "left"), ("mode", "left"), ("deserved", "right"), ("recommended", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    table.add_column("action / hold reason")
    done = {o.change.target: o.outcome for o in [*report.outcomes, *report.recommended]}
    for name, state in sorted(plan.desired.items()):
        mine = [c for c in plan.changes if c.queue == name]
        wanted = state.deserved.get(resource)
        moved = next((c for c in mine if c.field == "deserved" and c.resource == resource), None)
        current = moved.before if moved is not None else wanted
        mode = report.modes.get(name, "")
        if mine:
            action = done.get(name, "planned" if report.mode == "plan" else "unchanged")
            if mode == "recommend" and action in ("applied", "dry-run-ok"):
                action = "annotated" if action == "applied" else "annotation dry-run-ok"
            codes = ", ".join(sorted({c.code for c in mine}))
            action = f"{action} ({codes})"
        else:
            holds = [h for h in plan.held if h.queue == name]
            action = f"held: {holds[0].code}: {holds[0].reason}" if holds else "no change"
        table.add_row(name, mode, _gpus(current), _gpus(wanted), action)
    return table


def _none_managed() -> None:
    console.print(
        'note: no queue is managed: queues opt in with the annotation gpu-capacity-predictor/managed: "true" '
        "or labels matching actuators.queues.manage.selector (actuators.queues.manage.all: true manages all)",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _gpus(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def plan_command(
    ctx: typer.Context,
    queues: Annotated[Path, typer.Option("--queues", help="kubectl get queues.scheduling.volcano.sh -o json.")],
    forecast: Annotated[Path, typer.Option("--forecast", help="Forecast frame (series_id = queue name).")],
    out: Annotated[Path, typer.Option("--out", help="Directory for plan.json and queues/<name>.yaml.")],
    demand: Annotated[Path | None, typer.Option("--demand", help="Demand peaks: queue, peak[, resource].")] = None,
    nodes: Annotated[Path | None, typer.Option("--nodes", help="kubectl get nodes -o json (allocatable).")] = None,
    config: SettingsFileOption = None,
    now: Annotated[
        str | None, typer.Option("--now", help="Planning time (default: the forecast's first timestamp).")
    ] = None,
    pods: Annotated[
        Path | None,
        typer.Option("--pods", help="kubectl get pods -A -o json: gang floors, whole nodes, pools (with --nodes)."),
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            help="A cluster of the settings' fleet: --forecast "
            "and --demand name series <cluster>/<queue>; "
            "its rows are planned.",
        ),
    ] = None,
) -> None:
    """Plan Volcano queue quotas offline: writes the plan and the desired Queue objects, touches nothing."""
    from predictor.actuators.volcano import write_plan_dir
    from predictor.atomicio import check_output_directory
    from predictor.planner import allocatable_from_nodes, forecast_resources, plan_cycle, queues_from_list
    from predictor.planner.targets import check_forecast_columns
    from predictor.sources.files import parse_timestamps, read_frame
    from predictor.userfiles import read_structured

    settings = settings_from(ctx, config=config)
    p = settings.planner
    check_output_directory(out)
    doc = read_structured(queues, "--queues", InputError, "kubernetes list")
    live = queues_from_list(
        doc, source=str(queues), allocated_milli=p.allocated_milli_units, manage=settings.actuators.queues.manage
    )
    frame = read_frame(forecast)
    if cluster is not None:
        frame = _one_cluster(frame, settings, cluster, ID, source=str(forecast))
    if TIME not in frame.columns:
        raise InputError(f"{forecast}: missing column {TIME!r}")
    frame[TIME] = parse_timestamps(frame[TIME], forecast, TIME)
    check_forecast_columns(frame, p, source=str(forecast))
    at = parse_time(now, name="--now") if now else frame[TIME].min()
    demand_frame = _read_demand(demand, live, p, settings=settings, cluster=cluster) if demand else None
    allocatable = (
        allocatable_from_nodes(
            read_structured(nodes, "--nodes", InputError, "kubernetes list"),
            forecast_resources(frame, p),
            source=str(nodes),
        )
        if nodes
        else None
    )
    workload = None
    if pods is not None:
        from predictor.planner.workload import workload_from_objects

        node_doc = read_structured(nodes, "--nodes", InputError, "kubernetes list") if nodes else {"items": []}
        workload = workload_from_objects(
            read_structured(pods, "--pods", InputError, "kubernetes list"),
            node_doc,
            source=str(pods),
            node_source=str(nodes),
        )
    # The loop's own cycle (stale hold, targets, policy, invariant gate): the same plan from the same inputs.
    plan = plan_cycle(live, frame, p, now=at, allocatable=allocatable, demand=demand_frame, workload=workload).plan
    items = doc.get("items") if isinstance(doc, dict) else doc
    write_plan_dir(plan, list(items or []), out, models=_file_models(frame, demand_frame))
    console.print(_summary(f"plan at {at.isoformat()} → {out}", len(plan.changes), Counter(h.code for h in plan.held)))
    if not plan.desired:
        _none_managed()


def _one_cluster(frame: pd.DataFrame, settings: Settings, cluster: str, column: str, *, source: str) -> pd.DataFrame:
    """The rows of ``cluster`` in a fleet file (``column`` holds ``<cluster>/<queue>``), named by queue."""
    known = [c.name for c in settings.clusters]
    if cluster not in known:
        raise ConfigError(f"--cluster {cluster}: the settings list {', '.join(known) or 'no clusters'}")
    if column not in frame.columns:
        raise InputError(f"{source}: missing column {column!r}")
    prefix = f"{cluster}/"
    ids = frame[column].astype(str)
    mine = ids.str.startswith(prefix)
    if not mine.any():
        raise InputError(f"{source}: no series of cluster {cluster} (a fleet's files name them {prefix}<queue>)")
    return frame.loc[mine].assign(**{column: ids[mine].str.slice(len(prefix))}).reset_index(drop=True)


def _read_demand(
    path: Path, live: list[QueueState], p: PlannerSettings, *, settings: Settings, cluster: str | None = None
) -> pd.DataFrame:
    """The ``--demand`` file, checked here so that every error names it: numbers in range, one row per queue
    and resource. Rows for queues not in ``--queues`` are left out with one note (like forecast series)."""
    from predictor.planner.demand_rule import demand_peaks
    from predictor.sources.files import read_frame

    frame = read_frame(path)
    if cluster is not None:
        frame = _one_cluster(frame, settings, cluster, "queue" if "queue" in frame.columns else ID, source=str(path))
    try:
        peaks = demand_peaks(frame, p)
    except InputError as exc:
        raise InputError(f"{path}: {str(exc).removeprefix('demand frame: ').removeprefix('demand frame ')}") from exc
    if not frame.empty:
        queues = frame["queue" if "queue" in frame.columns else ID].astype(str)
        resources = frame["resource"].astype(str) if "resource" in frame.columns else p.resource
        keys = list(zip(queues, [resources] * len(frame) if isinstance(resources, str) else resources, strict=True))
        seen: set[tuple[str, str]] = set()
        for queue, resource in keys:
            if (queue, resource) in seen:
                raise InputError(
                    f"{path}: two rows for queue {queue!r} and resource {resource!r} (give one peak per queue)"
                )
            seen.add((queue, resource))
    known = {q.name for q in live}
    stray = sorted({queue for queue, _ in peaks} - known)
    if stray:
        console.print(
            f"note: {path}: demand for {len(stray)} queue(s) not in --queues left out: "
            f"{', '.join(stray[:5])}{' …' if len(stray) > 5 else ''}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    return frame


def _file_models(forecast: pd.DataFrame, demand: pd.DataFrame | None) -> dict[str, str] | None:
    """The models the input files name in a ``model`` column (``predictor demand`` writes one), if any."""
    from predictor.registry import DEMAND_FAMILY, FORECAST_FAMILY

    models = {}
    for family, frame in ((FORECAST_FAMILY, forecast), (DEMAND_FAMILY, demand)):
        if frame is not None and "model" in frame.columns:
            names = sorted({str(m) for m in frame["model"].dropna().unique() if str(m).strip()})
            if names:
                models[family] = ", ".join(names)
    return models or None


def loop_command(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help="Run one cycle and exit.")] = False,
    interval: Annotated[str | None, typer.Option("--interval", help="Cycle interval, e.g. 5m, 1h.")] = None,
    config: SettingsFileOption = None,
    history: HistoryOption = None,
    queues: Annotated[
        Path | None, typer.Option("--queues", help="Queues JSON instead of the API server (plan mode only).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Forecaster name instead of the registry champion (e.g. seasonal_naive_24)."),
    ] = None,
    kubeconfig: Annotated[
        Path | None, typer.Option("--kubeconfig", help="Kubeconfig (default: in-cluster, then ~/.kube/config).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Run even if this interval's cycle is done.")] = False,
    pending: Annotated[
        Path | None,
        typer.Option(
            "--pending",
            help="Pending GPUs per queue (series_id, timestamp, "
            "value) instead of Prometheus: with --history, "
            "turns on the demand model.",
        ),
    ] = None,
    metrics_file: Annotated[
        Path | None,
        typer.Option("--metrics-file", help="With --once: write the /metrics exposition to this file after the cycle."),
    ] = None,
) -> None:
    """Forecast, plan, and recommend or resize the Volcano queues that opt in, every interval.

    Demand: the gpu-demand champion sizes a queue when its peak is above the forecast. It is served when
    job data can be read (Prometheus, or --pending with --history); a --history file alone plans from the
    forecast only.

    XDP: with loop.xdp.enabled in the settings, each cycle also forecasts every node's link load from
    Prometheus (seasonal_mean_24), chooses its XDP profile and publishes the node agents' inputs
    (<plan_dir>/xdp/<node>.json in plan mode, else the predictor-xdp-inputs ConfigMap).

    Fleet: with clusters listed in the settings, one cycle per cluster, each on its own Kubernetes context,
    Lease (<lease_name>-<cluster>) and plan directory (<plan_dir>/<cluster>/); files given with --history
    and --pending name series <cluster>/<queue>.
    """
    from predictor.commands.demand import jobs_reader
    from predictor.loop import Loop

    if metrics_file is not None and not once:
        raise InputError("--metrics-file goes with --once (a running loop serves /metrics)")
    interval_s = parse_duration(interval, name="--interval").total_seconds() if interval else None
    settings = settings_from(ctx, config=config, loop={"interval_s": interval_s})
    if settings.clusters:
        from predictor.commands._loop_fleet import fleet_loop, run_fleet_once

        fleet = fleet_loop(
            settings, history=history, queues=queues, model=model, kubeconfig=kubeconfig, pending=pending
        )
        if once:
            try:
                run_fleet_once(fleet, settings, force=force)
            finally:
                _write_metrics(fleet.metrics, metrics_file)
        else:
            _run_forever(fleet, fleet.metrics, settings)
        return
    cluster, actuator = _cluster(settings, queues, kubeconfig)
    loop = Loop(
        settings,
        cluster=cluster,
        history=_history(settings, history),
        forecaster=parts.forecaster(settings, model),
        actuator=actuator,
        lease=parts.lease(settings, actuator),
        workload=_workload(settings, history),
        demand=parts.demand(settings, jobs_reader(settings, pending, history)),
    )
    parts.wire_xdp(loop, settings, actuator)
    parts.wire_rca(loop, settings, parts.rca_model(settings, loop.metrics))
    if once:
        try:
            _run_once(loop, settings, force=force)
        finally:
            _write_metrics(loop.metrics, metrics_file)
    else:
        _run_forever(loop, loop.metrics, settings)


def _cluster(
    settings: Settings, queues: Path | None, kubeconfig: Path | None
) -> tuple[ClusterReader, VolcanoActuator | None]:
    """Queues from a file (plan mode only) or from the API server through the Volcano actuator."""
    from predictor.loop import FileCluster, KubeCluster
    from predictor.userfiles import read_structured

    if queues is None:
        from predictor.actuators.volcano import VolcanoActuator, connect

        actuator = VolcanoActuator(connect(kubeconfig))
        return KubeCluster(actuator), actuator
    if settings.actuators.writes_cluster:
        raise InputError(
            "--queues works with actuators.queues.writes and actuators.xdp.mode plan only (a file cannot be patched)"
        )
    from predictor.planner import queues_from_list

    doc = read_structured(queues, "--queues", InputError, "kubernetes list")
    # A file is the user's input: a bad queue is an error now, not a "source_down" hold every cycle.
    queues_from_list(doc, source=str(queues), allocated_milli=settings.planner.allocated_milli_units)
    return FileCluster(doc), None


def _history(settings: Settings, history: Path | None) -> HistoryReader:
    from predictor.loop import FileHistory, SourceHistory

    if history is not None:
        return FileHistory(history)
    from predictor.sources.prometheus import PrometheusSource

    return SourceHistory(PrometheusSource(settings.prometheus))


def _workload(settings: Settings, history: Path | None) -> WorkloadReader | None:
    """Jobs and GPU nodes from kube-state-metrics where history comes from Prometheus; else unknown."""
    if history is not None:
        return None
    from predictor.loop import SourceWorkload
    from predictor.sources.prometheus import PrometheusSource

    return SourceWorkload(PrometheusSource(settings.prometheus))


def _run_once(loop: Loop, settings: Settings, *, force: bool) -> None:
    try:
        report = loop.run_once(force=force)
    finally:
        loop.close()
    if report.standby:
        console.print(f"standing by, nothing done: {report.standby}", markup=False, highlight=False, soft_wrap=True)
        return
    if report.skipped:
        console.print(
            f"cycle {report.cycle} already done (see {settings.actuators.audit_log}); use --force to run it again"
        )
        return
    held = Counter(h.code for h in report.plan.held) if report.plan else Counter()
    changes = len(report.plan.changes) if report.plan else 0
    console.print(_summary(f"cycle {report.cycle} ({settings.actuators.mode})", changes, held))
    if report.plan is not None and report.plan.desired:
        console.print(_recommendations(report, settings.planner.resource))
    elif report.plan is not None:
        _none_managed()
    if report.hold:
        console.print(f"held everything: {report.hold[1]}", markup=False)
    if loop.rca is not None and loop.rca.last is not None:
        from predictor.loop.rca import summary

        line = summary(loop.rca.last)
        if line:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    xdp = loop.xdp.last if loop.xdp is not None else None
    if xdp is not None:
        done = xdp.error or f"inputs for {len(xdp.nodes)} nodes ({len(xdp.skipped)} without)" + (
            f"; {xdp.published}" if xdp.published else f" in {settings.actuators.plan_dir / 'xdp'}"
        )
        console.print(f"XDP: {done}", markup=False, highlight=False, soft_wrap=True)


def _write_metrics(metrics: Probed, path: Path | None) -> None:
    """The exposition ``/metrics`` would serve now, written atomically (a cron job's textfile collector)."""
    if path is None:
        return
    from prometheus_client import generate_latest

    from predictor.atomicio import write_text

    write_text(path, generate_latest(metrics.registry).decode("utf-8"), permissions=0o644)


def _run_forever(loop: Loop | FleetLoop, metrics: Probed, settings: Settings) -> None:
    from predictor.loop import MetricsServer

    where = f"{settings.loop.metrics_address}:{settings.loop.metrics_port}"
    try:
        server = MetricsServer(metrics, settings.loop.metrics_port, settings.loop.metrics_address)
    except OSError as exc:
        raise ConfigError(f"cannot serve /metrics on {where}: {exc.strerror or exc}") from exc
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with server:
        console.print(
            f"loop every {settings.loop.interval_s:g} s in {settings.actuators.mode} mode; "
            f"metrics on {settings.loop.metrics_address}:{server.port}/metrics"
        )
        try:
            loop.run_forever(stop.is_set, sleep=stop.wait)
        except KeyboardInterrupt:
            stop.set()
