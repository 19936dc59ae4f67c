"""What the model-state walker (``models.state``) and its allow-list (``models.state_types``) share: the
error and the two walker interfaces the allow-list's rebuild hooks call. Kept apart so neither module
imports the other (import-linter's acyclic contract)."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["StateCheckError", "StateDecoder", "StateEncoder", "StateError"]


class StateError(ValueError):
    """An object that cannot be stored as state, or a state that does not describe a known object."""


class StateCheckError(StateError):
    """A rebuilt object that is unsafe to use: ``where`` names the refused value relative to the object
    (``.nodes[3].left``); the decoder adds where the object sits in the estimator."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where, self.reason = where, reason


class StateEncoder(Protocol):
    def value(self, v: Any, path: str) -> Any:
        """The JSON-safe description of ``v`` (arrays are stored aside); ``path`` names it in errors."""
        ...


class StateDecoder(Protocol):
    def value(self, node: Any) -> Any:
        """The value a description stands for."""
        ...
