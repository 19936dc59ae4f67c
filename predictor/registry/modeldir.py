"""A registered model on disk: ``data/state/state.json`` + ``arrays.safetensors``, checked before it is read.

What the registry stores is data (DESIGN, "Registry and retraining"): the estimator's state from
``models.state`` as strict JSON and a safetensors file of its arrays, inside an MLflow model directory whose
``MLmodel`` names our loader module (a code-free pyfunc: MLflow pickles nothing for it). A sha256 digest of
the two state files is recorded on the model version when it is registered. Reading checks, in order and
before parsing any state: that the directory is in this format (anything else, e.g. a ``python_model.pkl``
pyfunc, is refused unread), that only the expected plain files are there, and that their digest matches
the recorded one. Nothing here calls pickle, cloudpickle or ``torch.load``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from models.state import StateError, from_state, to_state
from predictor.errors import ModelRefusedError, RegistryError
from predictor.userfiles import check_size

__all__ = [
    "DIGEST_TAG",
    "KINDS",
    "LOADER_MODULE",
    "MODEL_FORMAT",
    "STATE_DIR",
    "read_model_dir",
    "read_state_dir",
    "state_digest",
    "write_state_dir",
]

MODEL_FORMAT = "gpu-capacity-predictor/model/1"
LOADER_MODULE = "predictor.registry.served"
STATE_DIR = "state"
STATE_PATH = f"data/{STATE_DIR}"  # where pyfunc.save_model puts ``data_path`` inside the model directory
STATE_FILES = ("state.json", "arrays.safetensors")
DIGEST_TAG = "state_sha256"
KINDS = ("forecast", "tabular")
_VERSIONED = ("numpy", "pandas", "scikit-learn", "statsmodels", "torch", "gpu-capacity-predictor")


def _versions() -> dict[str, str]:
    # recorded for whoever debugs a model later; loading does not depend on them
    out = {}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def state_digest(directory: Path) -> str:
    """sha256 over the state files, each framed by its name and length (a byte cannot move between them)."""
    digest = hashlib.sha256()
    for name in STATE_FILES:
        data = (directory / name).read_bytes()
        digest.update(name.encode() + b"\0" + len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


def write_state_dir(estimator: Any, kind: str, directory: Path) -> str:
    """Write ``estimator`` as state files into ``directory`` (created) and return their digest.

    An estimator holding a type the state code does not know fails here, before anything is logged.
    """
    from safetensors.numpy import save_file

    if kind not in KINDS:
        raise RegistryError(f"unknown model kind {kind!r} (known: {', '.join(KINDS)})")
    try:
        meta, arrays = to_state(estimator)
    except StateError as exc:
        raise RegistryError(f"cannot register {type(estimator).__name__} as data: {exc}") from exc
    document = {"format": MODEL_FORMAT, "kind": kind, "versions": _versions(), "state": meta}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / STATE_FILES[0]).write_text(
        json.dumps(document, allow_nan=False, separators=(",", ":")), encoding="utf-8"
    )
    save_file(arrays, str(directory / STATE_FILES[1]))
    return state_digest(directory)


def _check_layout(root: Path, what: str) -> Path:
    """The state directory of an MLflow model directory in our format, or RegistryError saying why not."""
    mlmodel = root / "MLmodel"
    if not mlmodel.is_file() or mlmodel.is_symlink():
        # Missing rather than refused: an empty download is what a lost or unmounted artifact store gives.
        raise RegistryError(f"{what}: no MLmodel file in its artifacts (missing or not a model); not loaded")
    try:
        check_size(mlmodel, what, ModelRefusedError)
        spec = yaml.safe_load(mlmodel.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, RecursionError, yaml.YAMLError) as exc:
        raise ModelRefusedError(f"{what}: unreadable MLmodel ({str(exc).splitlines()[0]})") from exc
    pyfunc = (spec.get("flavors") or {}).get("python_function") if isinstance(spec, dict) else None
    if not isinstance(pyfunc, dict) or pyfunc.get("loader_module") != LOADER_MODULE or pyfunc.get("data") != STATE_PATH:
        found = "a pickled python_model" if isinstance(pyfunc, dict) and "python_model" in pyfunc else "another format"
        raise ModelRefusedError(
            f"{what} is not a model of this project ({found}, not state files read by "
            f"{LOADER_MODULE}); refusing to load it, nothing was unpickled"
        )
    state = root / STATE_PATH
    if not state.is_dir() or state.is_symlink() or (root / "data").is_symlink():
        raise ModelRefusedError(f"{what} has no {STATE_PATH}/ directory; refusing to load it")
    found_files = sorted(p.name for p in state.iterdir())
    plain = all((state / n).is_file() and not (state / n).is_symlink() for n in STATE_FILES if n in found_files)
    if found_files != sorted(STATE_FILES) or not plain:
        raise ModelRefusedError(
            f"{what}: {STATE_PATH}/ holds {', '.join(found_files) or 'nothing'}, expected exactly "
            f"the plain files {', '.join(STATE_FILES)}; refusing to load it"
        )
    return state


def read_state_dir(directory: Path, what: str) -> tuple[Any, str]:
    """``(estimator, kind)`` from state files; any surprise is a RegistryError naming ``what``."""
    from safetensors import SafetensorError
    from safetensors.numpy import load

    for name in STATE_FILES:
        check_size(directory / name, what, ModelRefusedError, "model")
    try:
        document = json.loads((directory / STATE_FILES[0]).read_text(encoding="utf-8"))
        arrays = load((directory / STATE_FILES[1]).read_bytes())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError, SafetensorError) as exc:
        raise ModelRefusedError(f"{what}: unreadable state files ({str(exc).splitlines()[0]})") from exc
    if not isinstance(document, dict) or document.get("format") != MODEL_FORMAT:
        found = document.get("format") if isinstance(document, dict) else None
        raise ModelRefusedError(f"{what}: state.json is not {MODEL_FORMAT} (format {found!r}); refusing to load it")
    kind = document.get("kind")
    if kind not in KINDS:
        raise ModelRefusedError(f"{what}: unknown model kind {kind!r}")
    try:
        estimator = from_state(document.get("state"), arrays)
    except StateError as exc:
        raise ModelRefusedError(f"{what}: {exc}") from exc
    return estimator, str(kind)


def read_model_dir(
    root: Path, digest: str | None, what: str, check: Callable[[str], None] | None = None
) -> tuple[Any, str]:
    """``(estimator, kind)`` from a downloaded model directory, after the format and digest checks.

    ``check`` is called with the files' digest before anything in them is parsed (the signature check).
    """
    state = _check_layout(root, what)
    if not digest:
        raise ModelRefusedError(f"{what} has no {DIGEST_TAG} tag (not registered by this project); refusing to load it")
    actual = state_digest(state)
    if not hmac.compare_digest(actual, digest):
        raise ModelRefusedError(
            f"{what}: state files do not match the digest recorded at registration "
            f"({DIGEST_TAG} {digest[:12]}…, files {actual[:12]}…); refusing to load them"
        )
    if check is not None:
        check(actual)
    return read_state_dir(state, what)
