"""The MLflow model registry, behind a wrapper that every model family shares (see ``store``)."""

from __future__ import annotations

from predictor.registry.store import (
    CHALLENGER,
    CHAMPION,
    FAMILIES,
    ModelRegistry,
    ModelVersionInfo,
    beats,
)

__all__ = ["CHALLENGER", "CHAMPION", "FAMILIES", "ModelRegistry", "ModelVersionInfo", "beats"]
