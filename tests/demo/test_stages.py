"""The demo's stage runner: missing pieces are "not built yet", never faked; failures are contained."""

from __future__ import annotations

from pathlib import Path

import pytest

from predictor.commands.demo import STAGES
from predictor.config import load_settings
from predictor.demo import DemoContext, Stage, StageResult, module_exists, run_stages
from predictor.errors import InputError


def _ctx(tmp_path: Path) -> DemoContext:
    return DemoContext(out=tmp_path, settings=load_settings())


def test_missing_module_is_not_built_yet_and_never_runs(tmp_path: Path) -> None:
    ran: list[str] = []

    def stage(ctx: DemoContext) -> StageResult:
        ran.append("yes")
        return StageResult("done")

    missing = Stage("x", stage, needs=("predictor.no_such_piece",), owner="issue 99")
    [(_, result)] = run_stages([missing], _ctx(tmp_path))
    assert (result.status, ran) == ("not built yet", [])
    assert "issue 99" in result.summary


def test_missing_input_skips_and_errors_fail_only_their_stage(tmp_path: Path) -> None:
    def produce(ctx: DemoContext) -> StageResult:
        ctx.state["thing"] = 1
        return StageResult("done", wrote=(tmp_path / "a",))

    def broken(ctx: DemoContext) -> StageResult:
        raise InputError("bad input")

    stages = [Stage("needs other", produce, requires=("other",)), Stage("produce", produce),
              Stage("broken", broken), Stage("after", produce, requires=("thing",))]
    results = [(s.name, r.status, r.summary) for s, r in run_stages(stages, _ctx(tmp_path))]
    assert results == [("needs other", "skipped", "needs other from an earlier stage"), ("produce", "done", ""),
                       ("broken", "failed", "bad input"), ("after", "done", "")]


def test_stage_list_covers_the_main_job() -> None:
    names = [s.name for s in STAGES]
    assert names[0] == "history" and names[-1] == "write report"
    assert {"train forecasts", "train demand regressors", "train root-cause tree", "plan queues (one loop cycle)",
            "plan XDP profiles"} <= set(names)
    for stage in STAGES:  # every stage names the issue that builds it, for the "not built yet" line
        assert stage.owner


@pytest.mark.parametrize("name", ["predictor.sim", "predictor.reports", "no.such.module"])
def test_module_exists(name: str) -> None:
    assert module_exists(name) is (name != "no.such.module")
