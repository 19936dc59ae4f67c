"""An explicit name → forecaster-class registry (STYLE §4).

Names are what the CLI's ``--model`` accepts and what MLflow params record, so they are registered in one
visible place instead of being discovered by import side effects; an unknown name fails with the list of
known ones rather than a bare ``KeyError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["ForecasterRegistry", "UnknownForecasterError", "forecasters"]

T = TypeVar("T")


class UnknownForecasterError(ValueError):
    """A forecaster name that nobody registered."""


class ForecasterRegistry:
    """Maps a short name (``"lstm"``) to a class plus the constructor defaults that name implies."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[type[Any], dict[str, Any]]] = {}

    def register(self, name: str, **defaults: Any) -> Callable[[type[T]], type[T]]:
        """Class decorator: ``@forecasters.register("seasonal_naive_24", season=24)``."""

        def decorator(cls: type[T]) -> type[T]:
            if name in self._entries:
                raise ValueError(f"forecaster {name!r} is already registered")
            self._entries[name] = (cls, dict(defaults))
            return cls

        return decorator

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def create(self, name: str, **params: Any) -> Any:
        """A new, unfitted forecaster; ``params`` override the name's defaults."""
        try:
            cls, defaults = self._entries[name]
        except KeyError:
            raise UnknownForecasterError(f"unknown forecaster {name!r} (known: {', '.join(self.names())})") from None
        return cls(**{**defaults, **params})


forecasters = ForecasterRegistry()
