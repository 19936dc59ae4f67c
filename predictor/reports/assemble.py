"""From gathered inputs and a forecast to a written report, keeping the tables it was computed from.

The tables a report used (queue demand history, forecast, recommendations, quotas) are written next to
it under ``inputs/``, so anyone can rerun ``predictor forecast`` or ``predictor plan`` on exactly the same
data and check the report's numbers (the agreement test does).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from predictor.planner import PlannerSettings, QueuePlan
from predictor.reports.inputs import ReportInputs
from predictor.reports.model import Report, build_report
from predictor.reports.recommend import node_objects, plan_recommendations, queue_objects, recommendations_from_plan
from predictor.reports.render import write_report, write_text
from predictor.sources.files import write_frame

__all__ = ["ReportOutcome", "make_report"]

Progress = Callable[[str], None]


@dataclass
class ReportOutcome:
    report: Report
    paths: dict[str, Path]
    recommendations: pd.DataFrame


def make_report(
    inputs: ReportInputs,
    forecast: pd.DataFrame,
    planner: PlannerSettings,
    out: Path,
    *,
    plan: QueuePlan | None = None,
    plan_forecast: pd.DataFrame | None = None,
    rightsize: pd.DataFrame | None = None,
    window_days: int = 7,
    title: str = "GPU quota recommendations",
    sources: dict[str, str] | None = None,
    progress: Progress | None = None,
) -> ReportOutcome:
    """Plan (unless ``plan`` is given), build the report model, write every format and its input tables.

    ``plan_forecast``: the forecast ``plan`` was made from, where it is not ``forecast`` (the loop asks for
    ``planner.horizon_h`` hours, the report shows its whole window); written as ``inputs/plan_forecast.csv``."""
    say = progress or (lambda _: None)
    say("planning quotas")
    if plan is None:
        recommendations, _ = plan_recommendations(inputs, forecast, planner)
    else:
        recommendations = recommendations_from_plan(plan, inputs.quotas)
    say("building the report model")
    report = build_report(
        quotas=inputs.quotas,
        allocated=inputs.allocated,
        used=inputs.used,
        demand=inputs.demand,
        forecast=forecast,
        recommendations=recommendations,
        total_gpus=inputs.total_gpus,
        rightsize=rightsize,
        fragmentation=inputs.fragmentation,
        window_days=window_days,
        title=title,
        sources={**inputs.sources, **(sources or {})},
        notes=tuple(inputs.notes),
        fragmentation_advice=inputs.fragmentation_advice,
    )
    report.whatif_note = inputs.whatif_note
    if inputs.jobs is not None or inputs.replay_jobs is not None:
        say("replaying the window under today's and the recommended quotas")
        from predictor.errors import InputError
        from predictor.reports.whatif import jobs_from_attempts, whatif_rows

        jobs = inputs.replay_jobs
        if jobs is None:
            assert inputs.jobs is not None
            jobs = jobs_from_attempts(inputs.jobs)
        try:
            report.whatif = whatif_rows(
                jobs,
                inputs.quotas,
                recommendations,
                total_gpus=inputs.total_gpus,
                as_of=inputs.as_of,
                window_days=window_days,
            )
        except InputError as exc:  # e.g. no job submitted in the window: the report says so, in one line
            report.whatif_note = f"what-if: {exc}".splitlines()[0]
    say("writing tables")
    tables = out / "inputs"
    write_frame(inputs.demand, tables / "demand.csv")
    write_frame(forecast, tables / "forecast.csv")
    if plan_forecast is not None:
        write_frame(plan_forecast, tables / "plan_forecast.csv")
    write_frame(recommendations, tables / "recommendations.csv")
    write_frame(inputs.quotas, tables / "quotas.csv")
    # The planner's inputs as kubectl would print them, for ``predictor plan --queues … --nodes …``.
    write_text(tables / "queues.json", json.dumps({"items": queue_objects(inputs)}, indent=2) + "\n")
    write_text(tables / "nodes.json", json.dumps(node_objects(inputs.total_gpus), indent=2) + "\n")
    say("rendering HTML, Markdown, CSV and JSON")
    paths = write_report(report, out)
    return ReportOutcome(report=report, paths=paths, recommendations=recommendations)
