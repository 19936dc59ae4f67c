"""The demo's what-if tells the story the product exists for: under today's hand-set quotas some teams starve,
under the loop's recommendations they do not, and the numbers are the replay's, not the plan's.

Runs the demo's own history, plan and report stages on a smaller cluster (4 nodes, 3 weeks) with a local
forecaster in place of the trained champion, then replays the report window itself under the quotas the
report shows and checks every what-if number against those replay summaries.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from models.forecast import forecasters
from predictor.config import load_settings
from predictor.demo import DemoContext
from predictor.demo.stages import history_stage, plan_stage, report_stage
from predictor.loop import EstimatorForecaster
from predictor.replay import ReplaySettings, replay_quotas
from predictor.reports.headline import MEASURES
from predictor.sim import QueueSpec

pytestmark = pytest.mark.slow


def _specs(table: pd.DataFrame, queues: list[str]) -> list[QueueSpec]:
    """The quotas of a report table as the replay's queues: one per queue with jobs, capability ≥ deserved."""
    rows = {str(r["queue"]): r for r in table.to_dict("records")}
    specs = []
    for name in queues:
        r = rows[name]
        deserved = float(r["deserved"])
        capability = max(float(r["capability"]), deserved)
        specs.append(
            QueueSpec(name, deserved=deserved, capability=capability, guarantee=min(float(r["guarantee"]), deserved))
        )
    return specs


def test_the_demo_whatif_shows_less_starvation_and_its_numbers_are_the_replays(tmp_path: Path) -> None:
    ctx = DemoContext(tmp_path, load_settings(None), options={"sim": {"weeks": 3, "nodes": 4}})
    assert history_stage(ctx).status == "done"
    ctx.state["forecaster"] = EstimatorForecaster(forecasters.create("seasonal_naive_24"), version="local")
    assert plan_stage(ctx).status == "done"
    assert report_stage(ctx).status == "done"

    doc = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))
    rows = {r["measure"]: r for r in doc["whatif"]}
    by_key = {key: rows[label] for key, label, _, _ in MEASURES}
    improved = [
        key
        for key in ("pending_gpu_h", "wait_p50_min", "wait_p95_min", "lost_gpu_h")
        if by_key[key]["recommended"] < by_key[key]["as_run"] and by_key[key]["verdict"] == "better"
    ]
    assert improved, by_key
    assert "what-if" in ctx.headline and "starved GPU-h" in ctx.headline["what-if"]

    # The same window replayed here, under the quotas and the recommendations the report wrote.
    inputs = ctx.state["inputs"]
    tables = tmp_path / "report" / "inputs"
    window = pd.Timestamp(inputs.as_of)
    settings = ReplaySettings(
        nodes=int(inputs.total_gpus // 8),
        start=(window - pd.Timedelta(days=7)).ceil("h"),
        weeks=1.0,
        policy="static-hard",
    )
    jobs = inputs.replay_jobs
    queues = sorted(jobs["queue"].astype(str).unique())
    today = replay_quotas(jobs, _specs(pd.read_csv(tables / "quotas.csv"), queues), settings, window)
    after = replay_quotas(jobs, _specs(pd.read_csv(tables / "recommendations.csv"), queues), settings, window)
    for key, row in by_key.items():
        assert row["as_run"] == pytest.approx(round(float(today[key]), 3), abs=1e-9), key
        assert row["recommended"] == pytest.approx(round(float(after[key]), 3), abs=1e-9), key
