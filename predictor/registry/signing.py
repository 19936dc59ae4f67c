"""HMAC signatures on registered versions: proof of who registered a model, which the registry cannot forge.

The ``state_sha256`` digest is a tag in the same registry it protects: it proves the artifact store holds
the files that were registered, not that a training job registered them (anyone who can write to the
registry can write files and a matching digest). With ``mlflow.signing_key_file`` set, the training jobs
also tag each version with an HMAC-SHA256 over the family, version and state digest, keyed by a secret
that only they and the loop hold (the loop read-only, from a mounted file); the loop refuses any version
whose tag it cannot recompute. The registry credential alone cannot forge a tag, and a signed state cannot
be replayed under another family or version.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from predictor.errors import ConfigError, ModelRefusedError

__all__ = ["MIN_KEY_BYTES", "SIGNATURE_TAG", "read_key", "sign", "verify"]

SIGNATURE_TAG = "state_hmac_sha256"
MIN_KEY_BYTES = 32  # HMAC-SHA256's block-size-independent strength needs at least its output size
_CONTEXT = b"gpu-capacity-predictor/model-signature/1"


def read_key(path: Path) -> bytes:
    """The key in ``path`` (surrounding whitespace dropped: a Secret written with ``echo`` ends in a newline)."""
    try:
        key = path.read_bytes().strip()
    except OSError as exc:
        raise ConfigError(f"mlflow.signing_key_file {path}: cannot read it ({exc.strerror or exc})") from exc
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError(
            f"mlflow.signing_key_file {path}: the key has {len(key)} bytes, at least {MIN_KEY_BYTES} needed"
        )
    return key


def sign(key: bytes, family: str, version: str, digest: str) -> str:
    message = b"\0".join((_CONTEXT, family.encode(), version.encode(), digest.encode()))
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def verify(key: bytes, family: str, version: str, digest: str, tag: str | None, what: str) -> None:
    """Raise ``ModelRefusedError`` unless ``tag`` is the signature of these state files for this version."""
    if not tag:
        raise ModelRefusedError(
            f"{what} has no {SIGNATURE_TAG} tag and mlflow.signing_key_file is set; refusing to load it"
        )
    if not hmac.compare_digest(sign(key, family, version, digest), tag):
        raise ModelRefusedError(
            f"{what}: its {SIGNATURE_TAG} tag was not made with the configured signing key for these files; "
            "refusing to load it"
        )
