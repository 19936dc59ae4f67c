"""The registered model names, one per model family.

Training registers under these names, serving loads ``models:/<name>@champion`` by them and the demo and
``retrain`` print them, so they are written here once and imported everywhere else: a typo becomes an
import error instead of a model that trains into one name and is served from another.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["DEMAND_FAMILY", "FAMILIES", "FORECAST_FAMILY", "RCA_FAMILY"]

FORECAST_FAMILY = "gpu-forecast"
DEMAND_FAMILY = "gpu-demand"
RCA_FAMILY = "gpu-rca"
# ``predictor train <key>`` registers ``FAMILIES[key]``; ``retrain --family <key>`` takes the same keys.
FAMILIES: Mapping[str, str] = MappingProxyType(
    {"forecast": FORECAST_FAMILY, "demand": DEMAND_FAMILY, "rca": RCA_FAMILY}
)
