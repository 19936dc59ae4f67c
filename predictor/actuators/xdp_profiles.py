"""XDP profile files: the YAML an operator writes for ``predictor xdp set`` and the demo writes per node.

The ``Profile`` type itself belongs to the planner (``predictor.planner.xdp_types``), which emits it;
this module is only the file boundary, with the project's one-line errors naming the file and field.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from predictor.errors import InputError
from predictor.planner.xdp_types import Profile
from predictor.userfiles import read_structured, validate_as

__all__ = ["dump_profile", "load_profile"]


def load_profile(path: Path) -> Profile:
    """Read and validate a profile YAML file."""
    data = read_structured(path, "profile", InputError)
    if not isinstance(data, dict):
        raise InputError(f"profile {path} must be a mapping with name and weights")
    return validate_as(Profile, data, "profile", path, InputError)


def dump_profile(profile: Profile) -> str:
    """YAML text for a profile (what the planner writes for a node agent)."""
    return yaml.safe_dump(profile.model_dump(), sort_keys=False)
