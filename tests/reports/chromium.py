"""Headless Chromium as a test instrument: screenshot a page, dump its DOM, collect its console messages.

With ``--enable-logging=stderr --v=0`` Chromium prints every console message (errors, CSP violations,
blocked loads) as an ``INFO:CONSOLE`` line on stderr; the report's CSP turns any attempted fetch into
such a line, so "no console message" also means "no network request got out of the page".
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--enable-logging=stderr",
    "--v=0",
)


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def run(page: Path, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run Chromium once on ``page`` with a throw-away profile."""
    binary = chromium()
    assert binary is not None
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        return subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", *extra, page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def console_lines(stderr: str) -> list[str]:
    """Console messages the page produced (dbus/GPU warnings of the browser itself are not the page's)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def screenshot(page: Path, out: Path, size: str = "1280,2400") -> subprocess.CompletedProcess[str]:
    return run(page, f"--window-size={size}", f"--screenshot={out.resolve()}")


def dump_dom(page: Path) -> subprocess.CompletedProcess[str]:
    return run(page, "--dump-dom")
