"""The CLI shell: help, version, global options, and the one-line error contract."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from predictor import __version__
from predictor.cli import main


def test_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("version", "export", "demo", "train"):
        assert command in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert __version__ in capsys.readouterr().out


def test_console_script_runs_and_bad_config_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("prometheus: {retries: lots}\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "predictor.cli",
            "--config",
            str(bad),
            "export",
            "--query",
            "up",
            "--start",
            "2026-01-01",
            "--end",
            "2026-01-02",
            "--out",
            str(tmp_path / "x.csv"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip().startswith("error: invalid setting prometheus.retries")
    assert len(done.stderr.strip().splitlines()) == 1


def test_unknown_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--no-such-flag"]) == 2
