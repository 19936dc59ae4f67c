"""XDP load-balancing profiles: the YAML the operator writes and the planner emits.

A profile is ``{name, weights: {<target iface>: <int>}, observe: bool, sticky: bool}``. It names targets
by interface so a file reads the same on every node; the actuator maps names to devmap indexes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from predictor.errors import InputError
from predictor.userfiles import first_problem, read_structured

__all__ = ["NAME_MAX", "Profile", "dump_profile", "load_profile", "profile_from_data"]

NAME_MAX = 31  # LB_NAME_LEN - 1: the name is stored in the kernel table, NUL-terminated


class Profile(BaseModel):
    """One load-balancing profile."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=NAME_MAX, description="Shown by `predictor xdp status`.")
    weights: dict[str, int] = Field(description="Target interface → relative weight (0 drains it).")
    observe: bool = Field(False, description="Count decisions but pass every packet (in-kernel dry run).")
    sticky: bool = Field(False, description="Keep established flows on their target across switches.")

    @field_validator("name")
    @classmethod
    def _printable_ascii(cls, v: str) -> str:
        if not v.isascii() or not v.isprintable():
            raise ValueError("must be printable ASCII")
        return v

    @field_validator("weights")
    @classmethod
    def _valid_weights(cls, v: dict[str, int]) -> dict[str, int]:
        if not v:
            raise ValueError("needs at least one target")
        for iface, w in v.items():
            if w < 0:
                raise ValueError(f"weight of {iface} is negative")
        if sum(v.values()) <= 0:
            raise ValueError("needs at least one positive weight")
        return v


def profile_from_data(data: Any, source: str) -> Profile:
    """Validate parsed YAML/JSON into a Profile; ``source`` names the input in the one-line error."""
    if not isinstance(data, dict):
        raise InputError(f"profile {source} must be a mapping with name and weights")
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        where, problem = first_problem(exc, "profile")
        raise InputError(f"invalid profile {source}: {where}: {problem}") from exc


def load_profile(path: Path) -> Profile:
    """Read a profile YAML file."""
    data = read_structured(path, "profile", InputError)
    return profile_from_data(data, str(path))


def dump_profile(profile: Profile) -> str:
    """YAML text for a profile (what the planner writes for a node agent)."""
    return yaml.safe_dump(profile.model_dump(), sort_keys=False)
