"""The root-cause training job: labelled windows → fit → held-out evaluation → MLflow ``gpu-rca`` → gate.

Training data are the simulator's scenarios (``TRAIN_SCENARIOS``) plus a team's own incidents
(``pipelines.rca_incidents``: the ``--incidents`` file, else the mounted default when present) over their
history file or, without one, Prometheus around each incident; evaluation is always on ``HELDOUT_SCENARIOS``
(other seeds, sizes, rates and all fault strengths), so a champion and a challenger are compared on the same
rows. One tree is fitted per metric-family profile (``models.rca_profiled``); each profile's held-out macro-F1
is logged as a tag, and promotion is judged on the ``dcgm-default`` profile (what most sites export).
``champion`` moves by the one policy of ``predictor.registry.promotion``: only when the challenger's error
(1 - macro-F1) beats the champion's, re-scored on those rows, by the configured margin; a champion that
cannot be re-scored is kept.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from models.rca import RootCauseTree
from models.rca_eval import RcaReport, evaluate
from models.rca_profiled import ProfiledRca, blank, evaluate_profile, fit_profiled
from models.rca_profiles import DEFAULT_PROFILE, PROFILES
from pipelines.rca_configs import MISSING_SHARE, missing_groups
from pipelines.rca_data import HELDOUT_SCENARIOS, MIN_TRAIN_STRENGTH, TRAIN_SCENARIOS, Scenario, build_dataset
from pipelines.rca_incidents import DEFAULT_INCIDENTS, incident_rows, resolve_incidents
from predictor.config import Settings
from predictor.diagnose.models import save_model_file
from predictor.errors import InputError
from predictor.registry import RCA_FAMILY, ModelRegistry, git_revision, judge, settle, verdict_tags
from predictor.sources import MetricSource

__all__ = [
    "QUICK_HELDOUT",
    "QUICK_TRAIN",
    "RcaJob",
    "RcaOutcome",
    "default_cache_dir",
    "gate_report",
    "profile_tag",
    "train_rca",
]

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
    model: ProfiledRca
    report: RcaReport  # the dcgm-default profile's: what promotion is judged on
    version: str | None = None
    promoted: bool = False
    champion_macro_f1: float | None = None
    notes: list[str] = field(default_factory=list)
    profiles: dict[str, RcaReport] = field(default_factory=dict)
    real_incidents: int = 0

    def summary(self) -> str:
        text = (
            f"macro-F1 {self.report.macro_f1:.3f}, top-1 {self.report.top1:.3f}, top-3 {self.report.top3:.3f}, "
            f"healthy false alarms {self.report.false_alarm_rows:.3f} on {self.report.n_rows} held-out rows "
            f"({DEFAULT_PROFILE} profile)"
        )
        if self.version is not None:
            text += f"; registered {RCA_FAMILY} v{self.version} as challenger"
            text += ", promoted to champion" if self.promoted else ", champion kept"
        return "; ".join([text, *self.notes])


def profile_tag(profile: str) -> str:
    """The MLflow tag holding a profile's held-out macro-F1 (tag names allow no ``+``)."""
    return "macro_f1_" + profile.replace("+", "-plus-")


def gate_report(model: ProfiledRca | RootCauseTree, rows: pd.DataFrame, profile: str = DEFAULT_PROFILE) -> RcaReport:
    """What promotion is judged on: ``rows`` scored as a site with ``profile`` sees them, every cause
    included (one the profile cannot tell counts as missed, so no version gains by giving up on a cause).
    A model without that profile's tree (a single tree from an older release) answers with the tree it
    would pick for the profile's families."""
    profiled = model if isinstance(model, ProfiledRca) else ProfiledRca.of_tree(model)
    _, tree = profiled.for_present(PROFILES[profile].present)
    tree = profiled.models.get(profile, tree)
    return evaluate(tree, blank(rows, PROFILES[profile]))


def train_rca(
    settings: Settings, job: RcaJob, registry: ModelRegistry | None = None, source: MetricSource | None = None
) -> RcaOutcome:
    """Fit, evaluate on held-out scenarios, log to MLflow and promote if better (see module docstring).
    ``source`` is where incidents without a history file are read (default: the configured Prometheus)."""
    train_s = job.train_scenarios or (QUICK_TRAIN if job.quick else TRAIN_SCENARIOS)
    test_s = job.heldout_scenarios or (QUICK_HELDOUT if job.quick else HELDOUT_SCENARIOS)
    cache = job.cache_dir if job.cache_dir is not None else (None if job.quick else default_cache_dir())
    notes = []
    incidents = resolve_incidents(job.incidents)
    if job.history is not None and incidents is None:
        raise InputError(f"--history {job.history} needs --incidents (and {DEFAULT_INCIDENTS} does not exist)")
    own = None
    if incidents is not None:
        # The user's files first: a bad one fails in a second, not after minutes of simulated scenarios.
        if job.history is None and source is None:
            from predictor.sources.prometheus import PrometheusSource

            source = PrometheusSource(settings.prometheus)
        own = incident_rows(incidents, history=job.history, source=source, window=job.window)
    train = build_dataset(train_s, job.window, cache_dir=cache)
    if own is not None and len(own.rows):
        train = pd.concat([train, own.rows], ignore_index=True)
    if own is not None:
        notes.append(f"{len(own.rows)} rows from {own.incidents} real incident(s) in {incidents}")
    test = build_dataset(test_s, job.window, cache_dir=cache)
    # Like the bundled default: every droppable family masked on some rows and a tree fitted without each.
    model = fit_profiled(
        train, min_strength=MIN_TRAIN_STRENGTH, missing_groups=missing_groups(), missing_share=MISSING_SHARE
    )
    per_profile = {name: evaluate_profile(model, test, name) for name in model.models}
    report = gate_report(model, test)
    outcome = RcaOutcome(
        model=model,
        report=report,
        notes=notes,
        profiles=per_profile,
        real_incidents=own.incidents if own is not None else 0,
    )
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
        lambda champion: 1 - gate_report(champion, test).macro_f1,
        margin=settings.mlflow.promotion_margin,
        # no tolerance: the held-out scenarios are generated, the same for every version (no newer data to
        # follow), so any gain is real and a tie keeps the champion until it passes its maximum age
        max_age_s=settings.mlflow.max_champion_age_days * 86400,
        metric=f"held-out 1 - macro-F1 ({DEFAULT_PROFILE} profile)",
        data="the same held-out scenarios",
    )
    if verdict.rescored_score is not None:
        outcome.champion_macro_f1 = 1 - verdict.rescored_score
    elif verdict.champion_score is not None:  # a champion that could not be re-scored is kept: say why
        notes.append(verdict.reason)
    gated = model.models[DEFAULT_PROFILE]
    params = {
        "window": str(job.window),
        "train_scenarios": ",".join(s.name for s in train_s),
        "heldout_scenarios": ",".join(s.name for s in test_s),
        "min_train_strength": MIN_TRAIN_STRENGTH,
        "profiles": ",".join(model.models),
        "ccp_alpha": gated.ccp_alpha_,
        "depth": gated.tree_.get_depth(),
        **gated.get_params(),
    }
    learned = (
        f"Learned from {outcome.real_incidents} real incident(s) ({incidents}) besides the simulator scenarios."
        if incidents is not None
        else "Learned from simulator scenarios only: no real incidents were given."
    )
    per_profile_lines = "\n".join(
        f"| {name} | {r.macro_f1:.3f} | {r.top1:.3f} | {r.top1_strict:.3f} | {r.false_alarm_rows:.3f} | "
        f"{', '.join(model.cannot_tell(name)) or '-'} |"
        for name, r in per_profile.items()
    )
    card = (
        f"# {RCA_FAMILY}\nOne decision tree per metric-family profile over symptom windows ({job.window}).\n\n"
        f"{outcome.summary()}\n{learned}\nPromotion: {verdict.reason}.\n\n"
        "## Per profile (held out)\n\n| profile | macro-F1 | top-1 | top-1 strict | false alarms | cannot tell |\n"
        f"|---|---|---|---|---|---|\n{per_profile_lines}\n\n"
        f"## Per class, {DEFAULT_PROFILE} profile (held out)\n\n```\n{report.per_class.round(3).to_string()}\n```\n"
    )
    tags = {
        "git_revision": git_revision(),
        "real_incidents": str(outcome.real_incidents),
        **{profile_tag(name): f"{r.macro_f1:.4f}" for name, r in per_profile.items()},
        **verdict_tags(verdict),
    }
    info = registry.log_model(
        RCA_FAMILY,
        model,
        kind="tabular",
        params=params,
        metrics=report.metrics(),
        tags=tags,
        texts={"model_card.md": card, "confusion.csv": report.confusion.to_csv()},
        pip_requirements=("pandas", "numpy", "scikit-learn", "gpu-capacity-predictor"),
    )
    outcome.version = info.version
    outcome.promoted = settle(registry, RCA_FAMILY, info.version, verdict)
    return outcome
