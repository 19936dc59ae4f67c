"""An explicit name → forecaster-class registry (a table in one place, no discovery by import).

Names are what the CLI's ``--model`` accepts and what MLflow params record, so they are registered in one
visible place instead of being discovered by import side effects; an unknown name fails with the list of
known ones rather than a bare ``KeyError``. Everything else that needs forecaster names (the CLI's
choices, the default ``backtest`` set, which constructor parameters take the horizon) asks this registry,
so a newly registered forecaster appears everywhere by itself.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = ["ForecasterRegistry", "UnknownForecasterError", "forecasters", "serving_params"]

T = TypeVar("T")


class UnknownForecasterError(ValueError):
    """A forecaster name that nobody registered."""


class ForecasterRegistry:
    """Maps a short name (``"lstm"``) to a class plus the constructor defaults that name implies."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[type[Any], dict[str, Any]]] = {}
        self._aliases: dict[str, str] = {}

    def register(self, name: str, **defaults: Any) -> Callable[[type[T]], type[T]]:
        """Class decorator: ``@forecasters.register("seasonal_naive_24", season=24)``."""

        def decorator(cls: type[T]) -> type[T]:
            self._check_free(name)
            self._entries[name] = (cls, dict(defaults))
            return cls

        return decorator

    def alias(self, name: str, target: str) -> None:
        """Let ``name`` create exactly what ``target`` creates (a shorter spelling, listed once)."""
        self._check_free(name)
        self._entry(target)
        self._aliases[name] = target

    def names(self, *, aliases: bool = True) -> list[str]:
        """Every name ``create`` accepts; with ``aliases=False`` each distinct forecaster once."""
        return sorted({*self._entries, *(self._aliases if aliases else ())})

    def __contains__(self, name: object) -> bool:
        return name in self._entries or name in self._aliases

    def takes(self, name: str, parameter: str) -> bool:
        """Whether ``name``'s constructor has ``parameter`` (e.g. ``horizon``: the model must be told it)."""
        cls, _ = self._entry(name)
        return parameter in inspect.signature(cls).parameters

    def create(self, name: str, **params: Any) -> Any:
        """A new, unfitted forecaster; ``params`` override the name's defaults."""
        cls, defaults = self._entry(name)
        return cls(**{**defaults, **params})

    def _entry(self, name: str) -> tuple[type[Any], dict[str, Any]]:
        try:
            return self._entries[self._aliases.get(name, name)]
        except KeyError:
            raise UnknownForecasterError(f"unknown forecaster {name!r} (known: {', '.join(self.names())})") from None

    def _check_free(self, name: str) -> None:
        if name in self:
            raise ValueError(f"forecaster {name!r} is already registered")


forecasters = ForecasterRegistry()


def serving_params(name: str, horizon: int, params: Mapping[str, Any]) -> dict[str, Any]:
    """Constructor parameters that make forecaster ``name`` serve ``horizon`` steps; ``params`` win.

    Read from the constructors, not from a list of names, so a newly registered forecaster needs nothing
    here: a ``horizon`` parameter gets the horizon, a ``step`` (between inner backtest origins) one horizon,
    and a model that chooses among candidates (``candidate_params``) tells each horizon-aware candidate.
    The training pipeline builds every model it registers with these, and so does a replay that retrains.
    """
    extra = dict(params)
    for key in ("horizon", "step"):
        if forecasters.takes(name, key):
            extra.setdefault(key, horizon)
    if forecasters.takes(name, "candidate_params"):
        candidate = dict(extra.get("candidate_params") or {})
        for member in forecasters.names(aliases=False):
            if forecasters.takes(member, "horizon") and not forecasters.takes(member, "candidate_params"):
                candidate.setdefault(member, {"horizon": horizon})
        extra["candidate_params"] = candidate
    return extra
