"""The demo's stage machinery: one function per stage, a shared context, and a runner that never fakes.

A stage is ``Stage(name, run, requires=(context keys…))``. The runner marks a stage "skipped" when an
earlier stage did not produce what it requires, and otherwise runs it; ``run(ctx)`` returns a
``StageResult`` listing the paths it wrote and a one-line summary, and may put outputs into ``ctx.state``
for later stages. A known error (``PredictorError``) fails its stage only; anything else, a failing import
included, is a bug and propagates. Adding a stage = writing one function and adding one ``Stage`` to the list.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from predictor.config import Settings
from predictor.errors import PredictorError

__all__ = ["DemoContext", "Stage", "StageResult", "run_stages"]

Status = Literal["done", "reused", "skipped", "failed"]


@dataclass
class DemoContext:
    """What every stage sees: the output directory, settings, options, and earlier stages' outputs."""

    out: Path
    settings: Settings
    options: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    headline: dict[str, str] = field(default_factory=dict)
    progress: Callable[[str], None] = lambda _: None


@dataclass
class StageResult:
    status: Status
    summary: str = ""
    wrote: tuple[Path, ...] = ()
    seconds: float = 0.0


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[DemoContext], StageResult]
    requires: tuple[str, ...] = ()  # ctx.state keys earlier stages must have set; missing → "skipped"


def run_stages(
    stages: Sequence[Stage],
    ctx: DemoContext,
    *,
    on_start: Callable[[Stage], None] = lambda _: None,
    on_done: Callable[[Stage, StageResult], None] = lambda *_: None,
) -> list[tuple[Stage, StageResult]]:
    """Run ``stages`` in order; a known error fails its stage (and skips dependants), not the whole demo."""
    results: list[tuple[Stage, StageResult]] = []
    for stage in stages:
        lacking = [k for k in stage.requires if k not in ctx.state]
        if lacking:
            result = StageResult("skipped", f"needs {lacking[0]} from an earlier stage")
        else:
            on_start(stage)
            started = time.perf_counter()
            try:
                result = stage.run(ctx)
            except PredictorError as exc:
                result = StageResult("failed", str(exc))
            result.seconds = time.perf_counter() - started
        results.append((stage, result))
        on_done(stage, result)
    return results
