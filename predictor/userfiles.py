"""Reading the small YAML/JSON files users hand us (settings, profiles, agent inputs) with one-line errors.

Every such file fails the same three ways — unreadable, not parseable, not valid for its model — and each
must become one line naming the file and the field, in the caller's error type (ConfigError, InputError).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from predictor.errors import PredictorError

__all__ = ["first_problem", "read_as", "read_structured", "validate_as"]

M = TypeVar("M", bound=BaseModel)


def read_structured(path: Path, what: str, error: type[PredictorError]) -> Any:
    """Parsed YAML (or JSON for ``.json``) of ``path``; ``what`` names the file in messages."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        kind = "JSON" if path.suffix == ".json" else "YAML"
        raise error(f"{what} {path} is not valid {kind}: {exc}".replace("\n", " ")) from exc


def first_problem(exc: ValidationError, default: str) -> tuple[str, str]:
    """``(dotted field path, message)`` of the first validation error (``default`` when it has no path)."""
    first = exc.errors()[0]
    # pydantic prefixes a validator's own ValueError with "Value error, ": the message already says what is wrong.
    return ".".join(str(p) for p in first["loc"]) or default, str(first["msg"]).removeprefix("Value error, ")


def validate_as(model: type[M], data: Any, what: str, source: object, error: type[PredictorError]) -> M:
    """``data`` validated as ``model``; a failure is one line: ``invalid <what> <source>: <field>: <problem>``."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        where, problem = first_problem(exc, what)
        raise error(f"invalid {what} {source}: {where}: {problem}") from exc


def read_as(model: type[M], path: Path, what: str, error: type[PredictorError]) -> M:
    """The file at ``path`` parsed (``read_structured``) and validated as ``model`` (``validate_as``)."""
    return validate_as(model, read_structured(path, what, error), what, path, error)
