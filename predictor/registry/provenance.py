"""Where a registered model came from: the git revision of the code that trained it.

Every training run tags itself with it, so a registered version names the code that made it. It is read
from the directory of this package, not from the working directory, so a CronJob started anywhere records the
revision of the code that ran; outside a git checkout (an installed wheel, a container without ``.git``)
it is ``"unknown"``. A bounded timeout keeps a hung ``git`` from stalling a training job.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["UNKNOWN_REVISION", "git_revision"]

UNKNOWN_REVISION = "unknown"
_SOURCE_DIR = Path(__file__).resolve().parent


def git_revision(timeout_s: float = 5.0) -> str:
    """The short git revision of the checkout this code runs from, or ``"unknown"``."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            cwd=_SOURCE_DIR,
        )
    except (OSError, subprocess.TimeoutExpired):  # no git binary, or git hung on a slow filesystem
        return UNKNOWN_REVISION
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else UNKNOWN_REVISION
