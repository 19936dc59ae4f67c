"""The project's error tree: every foreign error is wrapped at the boundary into one of these.

    PredictorError                  base; the CLI prints ``str(exc)`` as one line and exits 1
    ├── ConfigError                 settings file or environment is invalid            (permanent)
    ├── InputError                  a user-supplied file, time, flag or frame is invalid (permanent)
    ├── DataSourceError             reading metrics failed
    │   ├── TemporaryDataSourceError   connection refused, timeout, 5xx — retried with backoff
    │   └── QueryError                 the server rejected the query (4xx) — never retried
    ├── ModelError                  a model is not fitted, cannot fit, or its input is unusable
    ├── RegistryError               MLflow tracking/registry failed or holds no such model/alias
    │   └── ModelRefusedError          a registered version is not our data format or fails its digest
    ├── ActuatorError               a plan could not be applied to a cluster or kernel
    │   └── TemporaryActuatorError     conflict (409), timeout — safe to retry after a fresh read
    └── EnvironmentUnsupportedError  this machine lacks a needed capability (root, bpffs, NVML driver)

Retryable versus permanent is part of the type (as in kopf's Temporary/Permanent errors): code that
retries catches ``Temporary*`` and nothing else, so a bad query is never hammered.

Messages quote settings (a Prometheus URL, an MLflow tracking URI), and a URL may carry a password
(``https://user:secret@host``). ``redact_url`` lives here, at the bottom of every layer, so the one rule
applies everywhere a message goes: every ``PredictorError`` redacts its message when it is raised (stderr,
the audit log, ``--debug`` tracebacks), and code that prints or writes a URL itself calls it.
"""

from __future__ import annotations

import re

__all__ = [
    "ActuatorError",
    "ConfigError",
    "DataSourceError",
    "EnvironmentUnsupportedError",
    "InputError",
    "ModelError",
    "ModelRefusedError",
    "PredictorError",
    "QueryError",
    "RegistryError",
    "TemporaryActuatorError",
    "TemporaryDataSourceError",
    "TemporaryError",
    "redact_url",
]

# scheme://authority: the authority ends where the path, query or fragment starts (RFC 3986 §3.2), or at
# whitespace or a quote when the URL sits inside free text.
_URL = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<authority>[^/?#\s\"'<>]*)")


def _redact_authority(match: re.Match[str]) -> str:
    userinfo, at, host = match["authority"].rpartition("@")
    user, colon, password = userinfo.partition(":")
    if not (at and colon and password):
        return match[0]
    return f"{match['scheme']}{user}:***@{host}"


def redact_url(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@host`` URL in it replaced by ``***``.

    Takes a bare URL or free text holding URLs (an error message, a report line); the user name, host and
    everything else are kept, so the redacted text still says where the program went.
    """
    return _URL.sub(_redact_authority, text)


class PredictorError(Exception):
    """Base of every error the project raises on purpose; its message is one line meant for a user."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact_url(a) if isinstance(a, str) else a for a in args))


class TemporaryError(PredictorError):
    """Marker: the same call may succeed later (retry with backoff)."""


class ConfigError(PredictorError):
    """The settings file, an environment variable or a secret file is invalid."""


class InputError(PredictorError):
    """A user-supplied input (file, timestamp, flag value, frame column) is invalid."""


class DataSourceError(PredictorError):
    """Metrics could not be read."""


class TemporaryDataSourceError(DataSourceError, TemporaryError):
    """Connection refused, timeout or 5xx: retried with backoff before surfacing."""


class QueryError(DataSourceError):
    """The server rejected a query (4xx): the query itself is wrong, so it is not retried."""


class ModelError(PredictorError):
    """A model is not fitted, cannot be fitted on this data, or was given unusable input."""


class RegistryError(PredictorError):
    """The MLflow tracking store or model registry failed, or holds no such model or alias."""


class ModelRefusedError(RegistryError):
    """A registered version that will never load: not stored as this project's data, or its files do not
    match the digest recorded at registration (permanent: retrying or waiting does not help)."""


class ActuatorError(PredictorError):
    """A plan could not be applied to a cluster or kernel."""


class TemporaryActuatorError(ActuatorError, TemporaryError):
    """A conflict (HTTP 409) or timeout: retry after a fresh read."""


class EnvironmentUnsupportedError(PredictorError):
    """This machine lacks a capability the command needs (root, bpffs, an NVIDIA driver, ...)."""
