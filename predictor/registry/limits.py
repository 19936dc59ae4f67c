"""How long a call to a remote MLflow may take: its HTTP timeout and retries, bounded by our settings.

MLflow's own defaults (a 120 s timeout, 7 retries with a doubling backoff from 2 s, plus jitter) make an
unreachable tracking server block each registry call for about four minutes. MLflow reads these limits
from the environment at each request, so they are set for the duration of our calls and restored
afterwards: a call to an unreachable MLflow fails within about ``(retries + 1) × timeout`` plus the
backoff, as one RegistryError line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from predictor.config import MlflowSettings

__all__ = ["http_limits"]


def _limits(settings: MlflowSettings) -> dict[str, str]:
    return {
        "MLFLOW_HTTP_REQUEST_TIMEOUT": str(settings.http_timeout_s),
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": str(settings.http_retries),
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": str(settings.http_backoff_s),
        "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0",
    }


@contextmanager
def http_limits(settings: MlflowSettings) -> Iterator[None]:
    """MLflow's HTTP limits taken from ``settings`` inside the block, the process's own restored after."""
    wanted = _limits(settings)
    previous = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
