"""The MLflow model registry, behind a wrapper that every model family shares (see ``store``).

``families`` names the registered models, ``promotion`` is the one champion/challenger policy every
training job uses, and ``provenance`` is the one git revision every run is tagged with.
"""

from __future__ import annotations

from predictor.registry.families import DEMAND_FAMILY, FAMILIES, FORECAST_FAMILY, RCA_FAMILY
from predictor.registry.promotion import (
    DECISION_TAG,
    UNSCORABLE,
    ChampionStore,
    Verdict,
    judge,
    settle,
    verdict_tags,
)
from predictor.registry.provenance import git_revision
from predictor.registry.store import (
    CHALLENGER,
    CHAMPION,
    ModelRegistry,
    ModelVersionInfo,
    beats,
)

__all__ = [
    "CHALLENGER",
    "CHAMPION",
    "DECISION_TAG",
    "DEMAND_FAMILY",
    "FAMILIES",
    "FORECAST_FAMILY",
    "RCA_FAMILY",
    "UNSCORABLE",
    "ChampionStore",
    "ModelRegistry",
    "ModelVersionInfo",
    "Verdict",
    "beats",
    "git_revision",
    "judge",
    "settle",
    "verdict_tags",
]
