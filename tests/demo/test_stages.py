"""The demo's stage runner: known errors fail only their stage, missing inputs skip, bugs propagate."""

from __future__ import annotations

from pathlib import Path

import pytest

from predictor.commands.demo import STAGES
from predictor.config import load_settings
from predictor.demo import DemoContext, Stage, StageResult, run_stages
from predictor.errors import InputError


def _ctx(tmp_path: Path) -> DemoContext:
    return DemoContext(out=tmp_path, settings=load_settings())


def test_a_failing_import_is_a_bug_and_propagates(tmp_path: Path) -> None:
    def stage(ctx: DemoContext) -> StageResult:
        raise ImportError("no module named predictor.no_such_piece")

    with pytest.raises(ImportError, match="no_such_piece"):
        run_stages([Stage("x", stage)], _ctx(tmp_path))


def test_missing_input_skips_and_errors_fail_only_their_stage(tmp_path: Path) -> None:
    def produce(ctx: DemoContext) -> StageResult:
        ctx.state["thing"] = 1
        return StageResult("done", wrote=(tmp_path / "a",))

    def broken(ctx: DemoContext) -> StageResult:
        raise InputError("bad input")

    stages = [
        Stage("needs other", produce, requires=("other",)),
        Stage("produce", produce),
        Stage("broken", broken),
        Stage("after", produce, requires=("thing",)),
    ]
    results = [(s.name, r.status, r.summary) for s, r in run_stages(stages, _ctx(tmp_path))]
    assert results == [
        ("needs other", "skipped", "needs other from an earlier stage"),
        ("produce", "done", ""),
        ("broken", "failed", "bad input"),
        ("after", "done", ""),
    ]


def test_stage_list_covers_the_main_job() -> None:
    names = [s.name for s in STAGES]
    assert names[0] == "history" and names[-1] == "write report"
    assert {
        "train forecasts",
        "train demand regressors",
        "train root-cause tree",
        "plan queues (hourly loop cycles, plan mode)",
        "plan XDP profiles",
    } <= set(names)
