"""Where the root-cause model comes from: the bundled default, a file the user names, or the registry.

The bundled default is a JSON description of one tree per metric-family profile (``data/rca-default.json``,
``models.rca_profiled``), produced by
``python -m pipelines.rca_default`` (deterministic: fixed simulator scenarios and seeds) and
committed, so ``predictor diagnose`` works out of the box and loading it executes no code (a pickle would;
training at first use would take minutes on two cores). ``--model
PATH`` reads the same JSON format, only from the path given (a single-tree file of an older release loads as
a one-profile model). ``--registry`` loads ``gpu-rca@champion`` only from the configured MLflow (the registry
wrapper keeps the last good model on a failed reload); a single-tree champion is wrapped the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

from models.rca import RootCauseTree
from models.rca_profiled import ProfiledRca
from predictor.atomicio import write_text
from predictor.config import MlflowSettings
from predictor.errors import InputError, ModelError, RegistryError
from predictor.registry import RCA_FAMILY
from predictor.userfiles import parse_structured, read_text

__all__ = [
    "DEFAULT_MODEL_PATH",
    "FAMILY",
    "check_registered",
    "load_default",
    "load_model_file",
    "load_registry",
    "save_model_file",
]

FAMILY = RCA_FAMILY
DEFAULT_MODEL_PATH = Path(__file__).with_name("data") / "rca-default.json"


def load_model_file(path: Path) -> ProfiledRca:
    """A model saved by ``save_model_file`` (JSON); errors name the file."""
    if not path.exists():
        raise InputError(f"--model {path}: no such file")
    data = parse_structured(read_text(path, "--model", InputError), "--model", path, InputError, is_json=True)
    if not isinstance(data, dict):
        raise InputError(f"--model {path}: not a JSON model file (top level is not an object)")
    try:
        return ProfiledRca.from_dict(data)
    except ValueError as exc:
        raise InputError(f"--model {path}: {exc}") from exc


def save_model_file(model: ProfiledRca | RootCauseTree, path: Path) -> None:
    """Write the model as JSON atomically (a failed write leaves no half file)."""
    text = json.dumps(model.to_dict(), separators=(",", ":"))
    write_text(path, text, permissions=0o644)  # a model file is meant to be shared


def load_default() -> ProfiledRca:
    """The bundled default model, trained on simulator scenarios."""
    if not DEFAULT_MODEL_PATH.is_file():
        raise ModelError(
            f"the bundled root-cause model {DEFAULT_MODEL_PATH} is missing; reinstall the package "
            "or run `python -m pipelines.rca_default`"
        )
    try:
        return load_model_file(DEFAULT_MODEL_PATH)
    except InputError as exc:
        raise ModelError(f"the bundled root-cause model is unreadable: {exc}") from exc


def load_registry(settings: MlflowSettings) -> ProfiledRca:
    """``gpu-rca@champion`` from the configured MLflow registry."""
    from predictor.registry import ModelRegistry

    return check_registered(
        ModelRegistry(settings).load_estimator(FAMILY), f"{FAMILY}@champion in {settings.tracking_uri}"
    )


def check_registered(estimator: object, where: str) -> ProfiledRca:
    """A registered estimator as the root-cause model ``diagnose`` takes; ``where`` names it in the error.

    The one check of what a ``gpu-rca`` version holds: ``predictor diagnose --registry`` and the loop's
    served champion (``predictor.loop.rca``) both go through it. A single tree (an older version) is
    wrapped as a one-profile model."""
    if isinstance(estimator, RootCauseTree):
        return ProfiledRca.of_tree(estimator)
    if not isinstance(estimator, ProfiledRca):
        raise RegistryError(f"{where} is not a root-cause model")
    return estimator
