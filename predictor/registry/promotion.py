"""The one promotion policy every training job uses: when a new version becomes ``champion``.

``ModelRegistry.log_model`` registers every new version with the alias ``challenger``. Whether it also
becomes ``champion`` is decided here, the same way for every family (``gpu-forecast``, ``gpu-demand``,
``gpu-rca``), from a score where lower is better (holdout MASE, pinball loss, 1 - macro-F1). The gate
compares what is served with what would be served: the pipeline scores the champion *as registered*
(its stored state, only updated with the newest history the way the loop serves it, never refitted)
and the challenger on data neither was fitted on (the newest window, held out of the challenger's fit):

- **no champion yet**: the first version is promoted (something must serve);
- **the champion cannot be served** (the registry refuses its files: not this project's data format, or
  they fail the digest recorded at registration, ``ModelRefusedError``): the challenger is **promoted**,
  because the champion will never load again and serving holds until something loadable is champion;
- **the champion lacks what serving needs and the challenger has it** (``precheck``, e.g. a ``gpu-demand``
  version without the queue regressor the loop serves): **promoted** without comparing scores;
- **the champion cannot be re-scored** (the registry is unreachable, it fails on this data): the
  champion is **kept** and the reason is recorded; an operator who wants the new version moves the alias;
- otherwise the scores decide, with ``tolerance`` as the band inside which two scores count as equal:
  **better** (lower by more than the tolerance, and by the ``margin``) promotes; **worse** (higher by more
  than the tolerance) keeps the champion; **equal** promotes only a challenger fitted on **newer data**
  than the champion (so a scheduled retrain follows the data, and a retrain on unchanged data does not
  churn the champion), or one replacing a champion **older than the maximum age** (not worse is enough
  then, margin or not).

The reason text (both scores, and the rule that decided) goes into the run's ``promotion`` tag and its
model card, and the rule's code into the ``promotion_decision`` tag that the loop exports on ``/metrics``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd

from predictor.errors import InputError, ModelError, ModelRefusedError, RegistryError
from predictor.registry.store import CHAMPION, ModelVersionInfo, beats

__all__ = [
    "DECISIONS",
    "DECISION_TAG",
    "UNSCORABLE",
    "ChampionStore",
    "Verdict",
    "fitted_later",
    "judge",
    "settle",
    "verdict_tags",
]

# What "the champion cannot be re-scored" means: the registry cannot hand it over (RegistryError), or the
# scoring on the challenger's data fails (the project's errors, or the estimators' ValueError and
# KeyError, e.g. a feature column the old version expects and the new data lacks).
UNSCORABLE: tuple[type[Exception], ...] = (RegistryError, ModelError, InputError, ValueError, KeyError)

DECISION_TAG = "promotion_decision"
# The rule that decided, as a short code (a label on /metrics): promoted, then kept.
DECISIONS = (
    "first",
    "champion_unservable",
    "champion_incomplete",
    "better",
    "newer_data",
    "champion_too_old",
    "kept_worse",
    "kept_not_better",
    "kept_unscorable",
    "kept_incomplete",
)


class ChampionStore(Protocol):
    """The part of ``ModelRegistry`` the policy needs."""

    def get(self, family: str, alias: str = CHAMPION) -> ModelVersionInfo | None: ...

    def load_estimator(self, family: str, alias: str = CHAMPION) -> Any: ...

    def promote(self, family: str, version: str) -> None: ...


@dataclass(frozen=True)
class Verdict:
    """What the policy decided about one challenger, why, and by which rule (``decision``, one of ``DECISIONS``).

    ``champion_score`` is None when there was no champion (or no score was needed) and NaN when it could
    not be re-scored; ``score`` is the challenger's score the decision used.
    """

    promote: bool
    reason: str
    champion_version: str | None = None
    champion_score: float | None = None
    decision: str = ""
    score: float | None = None

    @property
    def rescored_score(self) -> float | None:
        """The champion's score on the challenger's data when it got a finite one, else None."""
        if self.champion_score is None or not math.isfinite(self.champion_score):
            return None
        return self.champion_score


def fitted_later(data_end: str | None, champion: ModelVersionInfo) -> bool:
    """Whether a challenger whose data ends at ``data_end`` saw newer data than ``champion`` (its ``data_end``
    param); False when either end is unknown, so an unknown age never promotes by itself."""
    theirs = champion.params.get("data_end")
    if not data_end or not theirs:
        return False
    try:
        return bool(pd.Timestamp(data_end) > pd.Timestamp(theirs))
    except (ValueError, TypeError):
        return False


def judge(
    registry: ChampionStore,
    family: str,
    score: float,
    rescore: Callable[[Any], float],
    *,
    margin: float,
    tolerance: float = 0.0,
    data_end: str | None = None,
    max_age_s: float | None = None,
    precheck: Callable[[Any], tuple[bool, str] | None] | None = None,
    now_unix: float | None = None,
    metric: str = "backtest score",
    data: str = "the same data",
    fmt: str = ".4f",
) -> Verdict:
    """Decide whether a challenger scoring ``score`` (lower is better) should replace ``family``'s champion.

    ``rescore`` receives the champion's estimator (as ``ModelRegistry.load_estimator`` returns it) and
    scores it on the data the challenger was scored on. ``data_end``: where the challenger's training data
    ends (compared with the champion's ``data_end`` param); ``max_age_s``: the maximum champion age;
    ``precheck``: given the champion's estimator, ``(promote, reason)`` to decide before any scoring, or
    None to compare scores. ``metric`` and ``data`` only word the reason.
    """
    champion = registry.get(family)
    if champion is None:
        return Verdict(promote=True, reason="no champion yet", decision="first", score=score)
    name = f"champion v{champion.version}"
    try:
        estimator = registry.load_estimator(family)
        early = None if precheck is None else precheck(estimator)
        if early is not None:
            code = "champion_incomplete" if early[0] else "kept_incomplete"
            return Verdict(early[0], early[1], champion.version, None, code, score)
        champion_score = float(rescore(estimator))
    except ModelRefusedError as exc:
        why = f"{name} cannot be served ({exc}); replacing it"
        return Verdict(True, why, champion.version, float("nan"), "champion_unservable", score)
    except UNSCORABLE as exc:
        why = f"{name} could not be re-evaluated ({exc}); keeping it"
        return Verdict(False, why, champion.version, float("nan"), "kept_unscorable", score)
    scores = f"{metric} {score:{fmt}} vs {name} {champion_score:{fmt}} on {data}"
    if not math.isfinite(champion_score):
        return Verdict(
            False,
            f"{scores}: the champion scored no number; keeping it",
            champion.version,
            champion_score,
            "kept_unscorable",
            score,
        )
    age_s = None if champion.created_unix is None else (now_unix or time.time()) - champion.created_unix
    promote, code, rule = _rule(
        score,
        champion_score,
        margin=margin,
        tolerance=tolerance,
        newer=fitted_later(data_end, champion),
        aged=age_s is not None and max_age_s is not None and age_s > max_age_s,
    )
    if code == "champion_too_old" and age_s is not None:
        rule += f" ({age_s / 86400:.1f} days)"
    return Verdict(promote, f"{scores}: {rule}", champion.version, champion_score, code, score)


def _rule(
    score: float, champion: float, *, margin: float, tolerance: float, newer: bool, aged: bool
) -> tuple[bool, str, str]:
    """``(promote, decision, why)`` from two finite-or-NaN scores (see the module docstring)."""
    band = f"{tolerance:.0%} tolerance"
    if not math.isfinite(score) or score > champion * (1.0 + tolerance):
        return False, "kept_worse", f"worse by more than the {band}; champion kept"
    if beats(score, champion, tolerance) and beats(score, champion, margin):
        return True, "better", f"better by more than the {band} and the {margin:.0%} margin; promoted"
    if newer:
        return True, "newer_data", f"not worse (within the {band}) and fitted on newer data; promoted"
    if aged:
        return True, "champion_too_old", "not worse and the champion is older than its maximum age; promoted"
    return False, "kept_not_better", f"not better by more than the {band} nor fitted on newer data; champion kept"


def verdict_tags(verdict: Verdict) -> dict[str, str]:
    """The run tags a verdict leaves: why (``promotion``) and by which rule (``promotion_decision``)."""
    return {"promotion": verdict.reason, DECISION_TAG: verdict.decision}


def settle(registry: ChampionStore, family: str, version: str, verdict: Verdict) -> bool:
    """Move ``champion`` to the just-registered ``version`` if the verdict says so; True if it moved."""
    if verdict.promote:
        registry.promote(family, version)
    return verdict.promote
