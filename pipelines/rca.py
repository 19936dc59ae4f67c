"""The root-cause training job: labelled windows → fit → held-out evaluation → MLflow ``gpu-rca`` → gate.

Training data are the simulator's scenarios (``TRAIN_SCENARIOS``) plus, when given, a team's own
incidents over their history; evaluation is always on ``HELDOUT_SCENARIOS`` (other seeds, sizes, rates and
all fault strengths), so a champion and a challenger are compared on the same rows. ``champion`` moves
by the one policy of ``predictor.registry.promotion``: only when the challenger's error (1 - macro-F1) beats
the champion's, re-scored on those rows, by the configured margin; a champion that cannot be re-scored is kept.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from models.rca import RootCauseTree
from models.rca_eval import RcaReport, evaluate, fit_rca
from pipelines.rca_configs import MISSING_SHARE, missing_groups
from pipelines.rca_data import (
    HELDOUT_SCENARIOS,
    MIN_TRAIN_STRENGTH,
    TRAIN_SCENARIOS,
    Scenario,
    build_dataset,
    incident_windows,
    read_incidents,
)
from predictor.config import Settings
from predictor.diagnose.models import save_model_file
from predictor.registry import RCA_FAMILY, ModelRegistry, git_revision, judge, settle, verdict_tags
from predictor.sources.files import read_history

__all__ = ["QUICK_HELDOUT", "QUICK_TRAIN", "RcaJob", "RcaOutcome", "default_cache_dir", "train_rca"]

QUICK_TRAIN = (Scenario(seed=11, nodes=4, fault_rate_per_day=80, days=0.5),)
QUICK_HELDOUT = (Scenario(seed=12, nodes=4, fault_rate_per_day=80, days=0.5),)


def default_cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "gpu-capacity-predictor" / "rca-windows"


@dataclass
class RcaJob:
    window: pd.Timedelta = field(default_factory=lambda: pd.Timedelta(minutes=15))
    incidents: Path | None = None
    history: Path | None = None
    cache_dir: Path | None = None
    quick: bool = False
    register: bool = True
    save: Path | None = None
    train_scenarios: tuple[Scenario, ...] | None = None
    heldout_scenarios: tuple[Scenario, ...] | None = None


@dataclass
class RcaOutcome:
    model: RootCauseTree
    report: RcaReport
    version: str | None = None
    promoted: bool = False
    champion_macro_f1: float | None = None
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = (
            f"macro-F1 {self.report.macro_f1:.3f}, top-1 {self.report.top1:.3f}, top-3 {self.report.top3:.3f}, "
            f"healthy false alarms {self.report.false_alarm_rows:.3f} on {self.report.n_rows} held-out rows"
        )
        if self.version is not None:
            text += f"; registered {RCA_FAMILY} v{self.version} as challenger"
            text += ", promoted to champion" if self.promoted else ", champion kept"
        return "; ".join([text, *self.notes])


def train_rca(settings: Settings, job: RcaJob, registry: ModelRegistry | None = None) -> RcaOutcome:
    """Fit, evaluate on held-out scenarios, log to MLflow and promote if better (see module docstring)."""
    train_s = job.train_scenarios or (QUICK_TRAIN if job.quick else TRAIN_SCENARIOS)
    test_s = job.heldout_scenarios or (QUICK_HELDOUT if job.quick else HELDOUT_SCENARIOS)
    cache = job.cache_dir if job.cache_dir is not None else (None if job.quick else default_cache_dir())
    notes = []
    own = None
    if job.incidents is not None and job.history is not None:
        # The user's files first: a bad one fails in a second, not after minutes of simulated scenarios.
        own = incident_windows(read_history(job.history), read_incidents(job.incidents), job.window)
    train = build_dataset(train_s, job.window, cache_dir=cache)
    if own is not None:
        train = pd.concat([train, own], ignore_index=True)
        notes.append(f"{len(own)} rows from {job.incidents}")
    test = build_dataset(test_s, job.window, cache_dir=cache)
    # Like the bundled default: every droppable family masked on some rows and a tree fitted without each.
    model = fit_rca(
        train, min_strength=MIN_TRAIN_STRENGTH, missing_groups=missing_groups(), missing_share=MISSING_SHARE
    )
    report = evaluate(model, test)
    outcome = RcaOutcome(model=model, report=report, notes=notes)
    if job.save is not None:
        save_model_file(model, job.save)
        notes.append(f"saved to {job.save}")
    if not job.register:
        return outcome
    registry = registry or ModelRegistry(settings.mlflow)
    # The policy is lower-is-better: the challenger and the champion are compared on the error 1 - macro-F1.
    verdict = judge(
        registry,
        RCA_FAMILY,
        1 - report.macro_f1,
        lambda champion: 1 - evaluate(champion, test).macro_f1,
        margin=settings.mlflow.promotion_margin,
        # no tolerance: the held-out scenarios are generated, the same for every version (no newer data to
        # follow), so any gain is real and a tie keeps the champion until it passes its maximum age
        max_age_s=settings.mlflow.max_champion_age_days * 86400,
        metric="held-out 1 - macro-F1",
        data="the same held-out scenarios",
    )
    if verdict.rescored_score is not None:
        outcome.champion_macro_f1 = 1 - verdict.rescored_score
    elif verdict.champion_score is not None:  # a champion that could not be re-scored is kept: say why
        notes.append(verdict.reason)
    params = {
        "window": str(job.window),
        "train_scenarios": ",".join(s.name for s in train_s),
        "heldout_scenarios": ",".join(s.name for s in test_s),
        "min_train_strength": MIN_TRAIN_STRENGTH,
        "ccp_alpha": model.ccp_alpha_,
        "depth": model.tree_.get_depth(),
        **model.get_params(),
    }
    card = (
        f"# {RCA_FAMILY}\nDecision tree over symptom windows ({job.window}).\n\n{outcome.summary()}\n"
        f"Promotion: {verdict.reason}.\n\n"
        f"## Per class (held out)\n\n```\n{report.per_class.round(3).to_string()}\n```\n"
    )
    info = registry.log_model(
        RCA_FAMILY,
        model,
        kind="tabular",
        params=params,
        metrics=report.metrics(),
        tags={"git_revision": git_revision(), **verdict_tags(verdict)},
        texts={"model_card.md": card, "confusion.csv": report.confusion.to_csv()},
        pip_requirements=("pandas", "numpy", "scikit-learn", "gpu-capacity-predictor"),
    )
    outcome.version = info.version
    outcome.promoted = settle(registry, RCA_FAMILY, info.version, verdict)
    return outcome
