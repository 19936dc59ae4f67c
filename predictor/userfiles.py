"""Reading the files users hand us (settings, profiles, Kubernetes lists, agent inputs, tables, models).

Every such file fails the same ways — unreadable, too large, not UTF-8, not parseable, nested too deep,
not valid for its model — and each must become one line naming the file and the field, in the caller's
error type (ConfigError, InputError). The size is checked before a byte is read (a runaway file must not
be loaded to find out), and the nesting depth after parsing (Python's json and yaml recurse, so a deeply
nested document would otherwise end in a RecursionError; the cap keeps every later walk shallow too).

Stated maxima, by kind of file (``MAX_BYTES``):

- ``settings`` (settings, agent config, profiles, agent inputs, model files' descriptors): 16 MiB
- ``kubernetes list`` (``kubectl get queues/nodes/pods -o json``): 1 GiB
- ``table`` (CSV/Parquet history, job tables, forecasts): 16 GiB
- ``model`` (a model's saved state): 4 GiB
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from predictor.errors import PredictorError

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "Kind",
    "check_depth",
    "check_size",
    "first_problem",
    "parse_structured",
    "read_as",
    "read_structured",
    "read_text",
    "validate_as",
]

M = TypeVar("M", bound=BaseModel)
Kind = Literal["settings", "kubernetes list", "table", "model"]

MAX_BYTES: dict[Kind, int] = {
    "settings": 16 << 20,
    "kubernetes list": 1 << 30,
    "table": 16 << 30,
    "model": 4 << 30,
}
_NOUN: dict[Kind, str] = {
    "settings": "a settings file",
    "kubernetes list": "a Kubernetes list",
    "table": "a table",
    "model": "a model file",
}
# Deeper than any file of ours (a Kubernetes pod is about 10 levels), far below Python's recursion limit.
MAX_DEPTH = 64


def _size_text(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size / (1 << shift):g} {unit}"
    return f"{size} bytes"


def check_size(path: Path, what: str, error: type[PredictorError], kind: Kind = "settings") -> None:
    """Refuse ``path`` when it is larger than the stated maximum for its ``kind`` (checked before reading)."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    limit = MAX_BYTES[kind]
    if size > limit:
        raise error(f"{what} {path} is {_size_text(size)}, above the {_size_text(limit)} limit for {_NOUN[kind]}")


def read_text(path: Path, what: str, error: type[PredictorError], kind: Kind = "settings") -> str:
    """The UTF-8 text of ``path``: size checked first; unreadable or undecodable is one line naming it."""
    check_size(path, what, error, kind)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start]
        raise error(f"{what} {path} is not UTF-8 text (byte 0x{bad:02x} at offset {exc.start})") from exc


def check_depth(data: Any, what: str, source: object, error: type[PredictorError]) -> Any:
    """``data`` if its lists and mappings nest at most ``MAX_DEPTH`` deep.

    Walked level by level, each container once (a YAML alias shares one object among many places, and
    walking every place would take exponential time on a "billion laughs" document).
    """
    level: dict[int, Any] = {id(data): data} if isinstance(data, dict | list) else {}
    depth = 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            raise error(f"{what} {source} is nested deeper than {MAX_DEPTH} levels")
        below: dict[int, Any] = {}
        for container in level.values():
            for child in container.values() if isinstance(container, dict) else container:
                if isinstance(child, dict | list):
                    below[id(child)] = child
        level = below
    return data


def parse_structured(text: str, what: str, source: object, error: type[PredictorError], *, is_json: bool) -> Any:
    """``text`` parsed as JSON or YAML and depth-checked; every failure is one line naming ``source``."""
    kind = "JSON" if is_json else "YAML"
    try:
        data = json.loads(text) if is_json else yaml.safe_load(text)
    except RecursionError as exc:
        raise error(f"{what} {source} is nested deeper than {MAX_DEPTH} levels") from exc
    except (ValueError, yaml.YAMLError) as exc:
        raise error(f"{what} {source} is not valid {kind}: {exc}".replace("\n", " ")) from exc
    return check_depth(data, what, source, error)


def read_structured(path: Path, what: str, error: type[PredictorError], kind: Kind = "settings") -> Any:
    """Parsed YAML (or JSON for ``.json``) of ``path``; ``what`` names the file in messages."""
    text = read_text(path, what, error, kind)
    return parse_structured(text, what, path, error, is_json=path.suffix == ".json")


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


def read_as(model: type[M], path: Path, what: str, error: type[PredictorError], kind: Kind = "settings") -> M:
    """The file at ``path`` parsed (``read_structured``) and validated as ``model`` (``validate_as``)."""
    return validate_as(model, read_structured(path, what, error, kind), what, path, error)
