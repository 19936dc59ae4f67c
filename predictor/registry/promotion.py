"""The one promotion policy every training job uses: when a new version becomes ``champion``.

``ModelRegistry.log_model`` registers every new version with the alias ``challenger``. Whether it also
becomes ``champion`` is decided here, the same way for every family (``gpu-forecast``, ``gpu-demand``,
``gpu-rca``), from a score where lower is better (backtest MASE, pinball loss, 1 - macro-F1):

- **no champion yet**: the first version is promoted (something must serve);
- **the champion is re-scored on the same data** the challenger was scored on (same backtest window, same
  held-out runs or scenarios), through a callable the pipeline passes in, and the challenger is promoted
  only if it ``beats`` that score by the configured margin (``settings.mlflow.promotion_margin``);
- **the champion cannot be served** (the registry refuses its files: not this project's data format, or
  they fail the digest recorded at registration, ``ModelRefusedError``): the challenger is **promoted**,
  because the champion will never load again and serving holds until something loadable is champion;
- **the champion cannot be re-scored** (the registry is unreachable, it cannot be refitted or scored on
  this data): the champion is **kept** and the reason is recorded. A model that has been serving keeps serving
  rather than being replaced by one nobody could compare with it; an operator who wants the new version
  anyway moves the alias by hand. (``gpu-rca`` once replaced the champion in this case while the other two
  families kept it; this is now the one behaviour.)

The reason text goes into the run's ``promotion`` tag and its model card, so a reviewer reads why a
version was or was not promoted next to its metrics.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from predictor.errors import InputError, ModelError, ModelRefusedError, RegistryError
from predictor.registry.store import CHAMPION, ModelVersionInfo, beats

__all__ = ["UNSCORABLE", "ChampionStore", "Verdict", "judge", "settle"]

# What "the champion cannot be re-scored" means: the registry cannot hand it over (RegistryError), or the
# refit/score on the challenger's data fails (the project's errors, or the estimators' ValueError and
# KeyError, e.g. a feature column the old version expects and the new data lacks).
UNSCORABLE: tuple[type[Exception], ...] = (RegistryError, ModelError, InputError, ValueError, KeyError)


class ChampionStore(Protocol):
    """The part of ``ModelRegistry`` the policy needs."""

    def get(self, family: str, alias: str = CHAMPION) -> ModelVersionInfo | None: ...

    def load_estimator(self, family: str, alias: str = CHAMPION) -> Any: ...

    def promote(self, family: str, version: str) -> None: ...


@dataclass(frozen=True)
class Verdict:
    """What the policy decided about one challenger, and why.

    ``champion_score`` is None when there was no champion and NaN when it could not be re-scored.
    """

    promote: bool
    reason: str
    champion_version: str | None = None
    champion_score: float | None = None

    @property
    def rescored_score(self) -> float | None:
        """The champion's score on the challenger's data when it got a finite one, else None."""
        if self.champion_score is None or not math.isfinite(self.champion_score):
            return None
        return self.champion_score


def judge(
    registry: ChampionStore,
    family: str,
    score: float,
    rescore: Callable[[Any], float],
    *,
    margin: float,
    metric: str = "backtest score",
    data: str = "the same data",
    fmt: str = ".4f",
) -> Verdict:
    """Decide whether a challenger scoring ``score`` (lower is better) should replace ``family``'s champion.

    ``rescore`` receives the champion's estimator (as ``ModelRegistry.load_estimator`` returns it) and
    scores it on the data the challenger was scored on; it may refit a clone first. ``metric`` and
    ``data`` only word the reason, e.g. "backtest MASE 0.8123 vs champion v3 0.9011 on the same window".
    """
    champion = registry.get(family)
    if champion is None:
        return Verdict(promote=True, reason="no champion yet")
    try:
        champion_score = float(rescore(registry.load_estimator(family)))
    except ModelRefusedError as exc:
        return Verdict(
            True, f"champion v{champion.version} cannot be served ({exc}); replacing it", champion.version, float("nan")
        )
    except UNSCORABLE as exc:
        return Verdict(
            False,
            f"champion v{champion.version} could not be re-evaluated ({exc}); keeping it",
            champion.version,
            float("nan"),
        )
    promote = math.isfinite(champion_score) and beats(score, champion_score, margin)
    reason = f"{metric} {score:{fmt}} vs champion v{champion.version} {champion_score:{fmt}} on {data}"
    return Verdict(promote=promote, reason=reason, champion_version=champion.version, champion_score=champion_score)


def settle(registry: ChampionStore, family: str, version: str, verdict: Verdict) -> bool:
    """Move ``champion`` to the just-registered ``version`` if the verdict says so; True if it moved."""
    if verdict.promote:
        registry.promote(family, version)
    return verdict.promote
