"""Bundled CRD schemas, and validation of objects against them before anything is sent to a cluster.

The Volcano Queue CRD is copied into the package (see PROVENANCE.md) so the project validates offline.
Validation is stricter than plain JSON Schema in one place the API server is strict too: an ``integer``
must be a JSON integer, so ``8.0`` (a float quantity) is rejected here rather than with a 422 later.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
import yaml

from predictor.errors import ActuatorError

__all__ = ["QUEUE_CRD", "crd_schema", "validate_object"]

QUEUE_CRD = "queues.scheduling.volcano.sh.yaml"


@cache
def crd_schema(name: str = QUEUE_CRD, version: str = "v1beta1") -> dict[str, Any]:
    """The ``openAPIV3Schema`` of ``version`` in the bundled CRD file ``name``."""
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    crd = yaml.safe_load(text)
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version:
            schema: dict[str, Any] = entry["schema"]["openAPIV3Schema"]
            return schema
    raise ActuatorError(f"bundled CRD {name} has no version {version}")


def _strict_integer(checker: Any, instance: object) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


_TYPES = jsonschema.Draft7Validator.TYPE_CHECKER.redefine("integer", _strict_integer)
_Validator = jsonschema.validators.extend(jsonschema.Draft7Validator, type_checker=_TYPES)


def validate_object(obj: Mapping[str, Any], *, name: str = QUEUE_CRD) -> None:
    """Raise ``ActuatorError`` naming the first schema violation of ``obj``."""
    validator = _Validator(crd_schema(name))
    error = next(iter(sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))), None)
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "object"
        meta = obj.get("metadata")
        who = meta.get("name", "?") if isinstance(meta, Mapping) else "?"
        raise ActuatorError(f"queue {who!r} fails the CRD schema at {where}: {error.message}")
