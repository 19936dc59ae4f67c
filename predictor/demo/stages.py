"""The demo's runtime stages: history, right-sizing, hourly loop cycles in plan mode (queues and XDP), the report.

Each takes the shared ``DemoContext`` and returns what it wrote. Training stages live with the CLI
(``predictor.commands.demo``) because only the CLI may import ``pipelines``; they hand their results to
these stages through ``ctx.state`` (``forecaster``: something with the loop's ``Forecaster`` protocol).
"""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from models.frames import TIME, VALUE
from predictor.atomicio import write_text
from predictor.demo import DemoContext, StageResult
from predictor.errors import redact_url

__all__ = ["SIM_DEFAULTS", "history_stage", "plan_stage", "report_stage", "rightsize_stage", "xdp_stage"]

# Small enough for 2 cores, long enough for weekly backtests: 5 weeks, 16 nodes × 8 GPUs, 5-minute samples,
# demand close to capacity under hand-set hard quotas that starve the busy teams at peak (predictor.demo.cluster).
# Jobs recur (12 workload templates per queue, Zipf-skewed) so right-sizing has each workload's history.
SIM_DEFAULTS: dict[str, Any] = {
    "weeks": 5.0,
    "nodes": 16,
    "step_s": 300,
    "seed": 5,
    "start": "2026-01-05T00:00:00Z",
    "metrics": "core",
    "workloads_per_queue": 12,
    "jobs_per_hour": 7.0,
    "quotas": "hand-set",
}
XDP_LINK_BPS = 25e9  # the demo's assumed node topology: two 25 Gb/s steering targets per node
XDP_TARGETS = ("ens1f0", "ens1f1")


def _simulate(ctx: DemoContext, directory: Path, params: dict[str, Any]) -> None:
    from predictor import sim
    from predictor.demo.cluster import demo_jobs, hand_set_quotas
    from predictor.sources.files import write_frame

    start = pd.Timestamp(params["start"])
    settings = sim.SimSettings(
        start=start, weeks=params["weeks"], step_s=params["step_s"], seed=params["seed"], metrics=params["metrics"]
    )
    jobs = demo_jobs(params, start, settings.warmup_days)
    cluster = sim.ClusterSpec.uniform(params["nodes"])

    def progress(stage: str, fraction: float) -> None:
        ctx.progress(f"simulate: {stage} {100 * min(max(fraction, 0.0), 1.0):.0f} %")

    result = sim.simulate(jobs, cluster, settings, queues=hand_set_quotas(jobs, cluster.n_gpus), progress=progress)
    result.write(directory, parquet=True, progress=progress)
    # Every submitted job, started or not: the report's what-if replays these (attempts miss the starved ones).
    write_frame(jobs, directory / "jobs_in.parquet")


def history_stage(ctx: DemoContext) -> StageResult:
    """Simulate 5 weeks (or read Prometheus) and derive hourly queue tables; reused when parameters match."""
    from predictor.reports.inputs import inputs_from_directory, inputs_from_prometheus
    from predictor.sources.files import write_frame

    url = ctx.options.get("prometheus_url")
    directory = ctx.out / "history"
    status: Any = "done"
    if url:
        end = pd.Timestamp.now(tz="UTC").floor("h")
        inputs = inputs_from_prometheus(ctx.settings.prometheus, end=end, days=int(7 * SIM_DEFAULTS["weeks"]))
        summary = f"read {inputs.allocated['series_id'].nunique()} queues from {redact_url(url)}"
    else:
        params = {**SIM_DEFAULTS, **ctx.options.get("sim", {})}
        marker = directory / "params.json"
        wanted = json.dumps(params, sort_keys=True)
        if marker.is_file() and marker.read_text(encoding="utf-8") == wanted and (directory / "metrics").is_dir():
            status = "reused"
        else:
            shutil.rmtree(directory, ignore_errors=True)
            _simulate(ctx, directory, params)
            ref = resources.files("predictor.sim").joinpath("data/ATTRIBUTION.md")
            write_text(directory / "ATTRIBUTION.md", ref.read_text(encoding="utf-8"))
            write_text(marker, wanted)  # last: a run cut short is never reused
        ctx.progress("reading the simulated history")
        inputs = inputs_from_directory(directory)
        ctx.state["history_dir"] = directory
        summary = (
            f"{params['weeks']:g} weeks, {params['nodes']} nodes × 8 GPUs, {params['step_s']} s step; jobs "
            "drawn from distributions fitted to Microsoft Philly (Jeon et al., ATC 2019, CC BY 4.0), run times "
            "stretched to load the cluster; static hard quotas set by hand, short of the busy teams' peaks"
        )
    demand_path = write_frame(inputs.demand, directory / "queue_demand_hourly.csv")
    ctx.state.update(inputs=inputs, demand_path=demand_path, as_of=inputs.as_of)
    ctx.headline["history"] = f"{len(inputs.quotas)} queues, {inputs.total_gpus:g} GPUs, up to {inputs.as_of}"
    return StageResult(status, summary, (directory,))


def rightsize_stage(ctx: DemoContext) -> StageResult:
    """Per-workload GPU recommendations from what runs really used; savings in GPU-hours for the report."""
    from predictor.reports.inputs import rightsize_from_directory, rightsize_from_prometheus, rightsize_savings
    from predictor.sources.files import write_frame

    step_s = int(SIM_DEFAULTS["step_s"])
    if "history_dir" in ctx.state:
        table, runs = rightsize_from_directory(ctx.state["history_dir"], step_s=step_s)
    else:  # --prometheus-url: the same joins over the server's DCGM and kube-state-metrics series
        table, runs = rightsize_from_prometheus(
            ctx.settings.prometheus, end=ctx.state["as_of"] + pd.Timedelta(hours=1), step_s=step_s
        )
    path = write_frame(table, ctx.out / "rightsize" / "rightsize.csv")
    savings = rightsize_savings(table, runs)
    ctx.state.update(rightsize=table, runs=runs, rightsize_savings=savings)
    ctx.headline["right-sizing"] = f"{float(savings['savings_gpu_h'].sum()):,.0f} GPU-h recoverable"
    return StageResult("done", f"{len(table)} workloads from {len(runs)} runs", (path,))


# Hourly loop cycles before the one the demo reports: the shrink stabilisation window (6 h by default) needs a
# recommendation older than it, so a loop's first cycle never shrinks a queue (a restart must not be the fastest
# way to shrink one). The demo plans as a loop that has been running that long would, not as a fresh one.
WARMUP_CYCLES = 7


def plan_stage(ctx: DemoContext) -> StageResult:
    """Loop cycles in plan mode against the simulated cluster, hourly up to the end of the history (the last
    one's plan is the demo's): Volcano Queue plan, XDP agent inputs (``plans/xdp/``), audit log."""
    from prometheus_client import CollectorRegistry

    from predictor.loop import FileCluster, FileHistory, Loop, LoopMetrics
    from predictor.reports.recommend import node_objects, queue_objects

    inputs = ctx.state["inputs"]
    loop_dir, plan_dir = ctx.out / "loop", ctx.out / "plans"
    for stale in (loop_dir, plan_dir):  # each demo run is one fresh cycle: no cooldown from the last run
        shutil.rmtree(stale, ignore_errors=True)
    from predictor.config import QueueActuatorSettings, XdpActuatorSettings
    from predictor.planner.selection import ManagedQueues

    # The simulated cluster's queues carry no opt-in annotation: the demo manages them all, as a plan.
    queues = QueueActuatorSettings(writes="plan", mode="apply", manage=ManagedQueues(all=True))
    actuators = ctx.settings.actuators.model_copy(
        update={
            "queues": queues,
            "xdp": XdpActuatorSettings(mode="plan"),
            "plan_dir": plan_dir,
            "audit_log": loop_dir / "audit.jsonl",
        }
    )
    settings = ctx.settings.model_copy(update={"actuators": actuators})
    as_of = ctx.state["as_of"]
    history = FileHistory(ctx.state["demand_path"])
    metrics = LoopMetrics(CollectorRegistry())
    clock = [as_of - pd.Timedelta(hours=WARMUP_CYCLES)]
    loop = Loop(
        settings,
        cluster=FileCluster(queue_objects(inputs), node_objects(inputs.total_gpus)),
        history=history,
        forecaster=ctx.state["forecaster"],
        metrics=metrics,
        clock=lambda: clock[0],
        demand=ctx.state.get("demand_reader"),
        xdp=_xdp_loop(ctx, metrics.registry),
    )
    for hours in range(WARMUP_CYCLES, 0, -1):  # plan mode: nothing is applied, only the memory fills
        ctx.progress(f"loop cycle at {hours} h before the end of the history")
        clock[0] = as_of - pd.Timedelta(hours=hours)
        loop.run_once(force=True)
    clock[0] = as_of
    report = loop.run_once(force=True)
    if report.plan is None:
        return StageResult("failed", f"the cycle planned nothing: {report.hold}")
    ctx.state.update(plan=report.plan, loop_history=history.history(as_of), xdp=loop.xdp.last if loop.xdp else None)
    held = f", everything held: {report.hold[1]}" if report.hold else f", {len(report.plan.held)} held"
    ctx.headline["queue plan"] = f"{len(report.plan.changes)} field changes planned{held}"
    return StageResult(
        "done",
        f"{len(report.plan.changes)} changes{held} at the last of {WARMUP_CYCLES + 1} hourly "
        "cycles (dry run: plan files only)",
        (plan_dir / "plan.json", plan_dir / "queues", plan_dir / "xdp", loop_dir / "audit.jsonl"),
    )


def _counter_bps(path: Path, as_of: pd.Timestamp, days: float) -> pd.DataFrame:
    """Hourly bits per second per node and device from a node_exporter byte counter (what ``rate`` gives)."""
    import pyarrow.parquet as pq

    frame = pq.read_table(path, columns=["node", "device", TIME, VALUE]).to_pandas()
    frame = frame[(frame[TIME] > as_of - pd.Timedelta(days=days)) & (frame[TIME] <= as_of)]
    frame = frame.assign(
        node=frame["node"].astype(str), device=frame["device"].astype(str), hour=frame[TIME].dt.floor("h")
    )
    last = frame.sort_values(TIME).groupby(["node", "device", "hour"], as_index=False)[VALUE].last()
    last = last.sort_values(["node", "device", "hour"])
    step = last.groupby(["node", "device"])["hour"].diff().dt.total_seconds()
    bps = last.groupby(["node", "device"])[VALUE].diff().clip(lower=0) * 8 / step
    out = pd.DataFrame({"node": last["node"], "device": last["device"], TIME: last["hour"], VALUE: bps})
    return out.dropna(subset=[VALUE])


def _xdp_source(history: Path, as_of: pd.Timestamp, gpus_per_node: int = 8) -> Any:
    """The simulated cluster as the loop's XDP source: network counters and the jobs running at ``as_of``."""
    from predictor.loop.xdp_io import FrameXdpSource

    parts = [
        _counter_bps(history / "metrics" / f"node_network_{d}_bytes_total.parquet", as_of, 9).assign(direction=d)
        for d in ("receive", "transmit")
    ]
    columns = ["job_id", "queue", "num_gpus", "start", "end", "nodes"]
    jobs = pd.read_parquet(history / "jobs_out.parquet", columns=columns)
    running = jobs[(jobs["start"] <= as_of) & (jobs["end"] > as_of)]
    pods = [
        {
            "node": node,
            "namespace": str(queue),
            "pod": f"{job}-{i}",
            "job": str(job),
            "queue": str(queue),
            "gpus": float(gpus) / len(nodes.split()),
        }
        for job, queue, gpus, nodes in zip(
            running["job_id"], running["queue"], running["num_gpus"], running["nodes"].astype(str), strict=True
        )
        for i, node in enumerate(nodes.split())
    ]
    network = pd.concat(parts, ignore_index=True)
    nodes = sorted(network["node"].unique())
    return FrameXdpSource(
        network,
        pd.DataFrame(pods, columns=["node", "namespace", "pod", "job", "queue", "gpus"]),
        dict.fromkeys(nodes, float(gpus_per_node)),
    )


def _xdp_loop(ctx: DemoContext, registry: Any) -> Any:
    """The loop's XDP part for the demo's cluster: the simulated one, or the Prometheus of --prometheus-url."""
    from predictor.config import XdpLoopSettings
    from predictor.loop.xdp import XdpLoop
    from predictor.loop.xdp_io import PrometheusXdpSource

    settings = XdpLoopSettings(enabled=True, targets=list(XDP_TARGETS), capacity_bps=XDP_LINK_BPS)
    if "history_dir" in ctx.state:
        source = _xdp_source(ctx.state["history_dir"], ctx.state["as_of"])
    else:
        from predictor.sources.prometheus import PrometheusSource

        source = PrometheusXdpSource(PrometheusSource(ctx.settings.prometheus), settings)
    return XdpLoop(settings, source, registry=registry)


def xdp_stage(ctx: DemoContext) -> StageResult:
    """Sum up the XDP agent inputs the loop cycle wrote (``plans/xdp/``): the loop stage plans XDP, not this."""
    report = ctx.state.get("xdp")
    if report is None:
        return StageResult("skipped", "the loop cycle did not plan XDP")
    if report.error:
        return StageResult("failed", report.error)
    sticky = sum(1 for n in report.nodes if n.profile.sticky)
    ctx.headline["XDP profiles"] = f"{len(report.nodes)} nodes, {sticky} sticky"
    return StageResult(
        "done",
        f"{len(report.nodes)} node inputs from the loop cycle ({report.forecaster}; assumed "
        f"2 × {XDP_LINK_BPS / 1e9:g} Gb/s targets per node, each simulated node's eth0 load split "
        "evenly over them)",
        (ctx.out / "plans" / "xdp",),
    )


def report_stage(ctx: DemoContext) -> StageResult:
    """The quota report from the same history, forecaster and plan the loop cycle used."""
    from predictor.reports.assemble import make_report
    from predictor.reports.headline import whatif_headline

    inputs = ctx.state["inputs"]
    history = ctx.state.get("loop_history", inputs.demand)
    forecast, versions = ctx.state["forecaster"].forecast(history, horizon=7 * 24)
    outcome = make_report(
        inputs,
        forecast,
        ctx.settings.planner,
        ctx.out / "report",
        plan=ctx.state.get("plan"),
        rightsize=ctx.state.get("rightsize_savings"),
        title="GPU quota recommendations (demo)",
        sources={"forecast": ", ".join(versions.values()) or "local"},
        progress=ctx.progress,
    )
    s = outcome.report.summary
    ctx.state["report"] = outcome.report
    ctx.headline["quota utilisation"] = _utilisation_line(
        s.quota_utilisation_now, s.quota_utilisation_expected, outcome.report.whatif
    )
    ctx.headline["idle quota"] = f"{s.idle_quota_gpu_h:,.0f} GPU-h in the last {s.window_days} days"
    ctx.headline["what-if"] = whatif_headline(outcome.report.whatif, outcome.report.whatif_note)
    return StageResult(
        "done", f"{len(outcome.report.queues)} queues; {len(s.top_actions)} top actions", tuple(outcome.paths.values())
    )


def _utilisation_line(now: float | None, after: float | None, whatif: tuple[Any, ...]) -> str:
    """Quota utilisation now → after the recommendations, and, when after is lower, why that is the plan.

    Utilisation after is the window's demand over the recommended deserved. The planner raises deserved
    for queues whose demand it expects above their share (the demand rule takes the larger of the forecast
    quantile and the demand peak, plus headroom), so after can be below now on purpose; then the line
    states the starvation that avoids as the what-if replay measured it (or that it avoids none), instead of
    a bare lower number.
    """
    from predictor.reports.whatif import starvation_avoided

    line = f"{100 * (now or 0):.0f} % now → {100 * (after or 0):.0f} % after"
    if now is None or after is None or round(100 * after) >= round(100 * now):
        return line
    return f"{line}: the recommendations raise deserved; {starvation_avoided(tuple(whatif))}"
