"""The XDP load-balancing profile: what the planner emits and the node agent applies.

A profile is ``{name, weights: {<target iface>: <int>}, observe: bool, sticky: bool}``. It names targets
by interface so a file reads the same on every node; the actuator maps names to devmap indexes. The type
and its validation live with the planner (pure data, no I/O) so the profile policy never imports an
actuator; reading and writing profile files is ``predictor.actuators.xdp_profiles``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["NAME_MAX", "Profile"]

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
