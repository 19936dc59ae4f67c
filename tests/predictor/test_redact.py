"""Passwords inside URLs never reach stdout, stderr or the audit log.

One helper (``predictor.errors.redact_url``); every ``PredictorError`` applies it to its message, the
audit log to each reason, and the few places that print a URL themselves call it.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from predictor.actuators.audit import AuditLog, AuditRecord
from predictor.cli import main
from predictor.errors import DataSourceError, PredictorError, RegistryError, TemporaryDataSourceError, redact_url
from tests.actuators.fake_apiserver import queue_object

SECRET = "hunter2"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://admin:hunter2@prom:9090/api", "http://admin:***@prom:9090/api"),
        ("https://a:b@c", "https://a:***@c"),
        ("postgresql://mlflow:p%40ss@db:5432/mlflow", "postgresql://mlflow:***@db:5432/mlflow"),
        ("http://user:p@ss@host/x?y=1#z", "http://user:***@host/x?y=1#z"),  # an unencoded @: cut at the last one
        (
            "Prometheus at http://u:s3@h:1 failed; see https://x:y@z/.",
            "Prometheus at http://u:***@h:1 failed; see https://x:***@z/.",
        ),
        ("'http://u:pw@h'", "'http://u:***@h'"),
        # Nothing to hide: left exactly as it is.
        ("http://prom:9090", "http://prom:9090"),
        ("http://token@host", "http://token@host"),
        ("http://user:@host", "http://user:@host"),
        ("sqlite:////var/lib/mlflow.db", "sqlite:////var/lib/mlflow.db"),
        ("http://h/path?next=http://a:b@c", "http://h/path?next=http://a:***@c"),
        ("no url here: a:b@c", "no url here: a:b@c"),
        ("", ""),
    ],
)
def test_redact_url(text: str, expected: str) -> None:
    assert redact_url(text) == expected
    assert redact_url(expected) == expected  # idempotent


@pytest.mark.parametrize("kind", [PredictorError, DataSourceError, TemporaryDataSourceError, RegistryError])
def test_every_project_error_redacts_its_message(kind: type[PredictorError]) -> None:
    exc = kind(f"cannot load gpu-forecast from https://ci:{SECRET}@mlflow.example:5000: 503")
    assert SECRET not in str(exc) and SECRET not in repr(exc) and "https://ci:***@mlflow.example:5000" in str(exc)
    assert exc.args == (str(exc),)


def test_the_audit_log_redacts_reasons(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    log.append(
        [
            AuditRecord(
                timestamp="t",
                cycle="c",
                queue="*",
                field=None,
                before=None,
                after=None,
                reason=f"history unavailable: http://u:{SECRET}@prom failed",
                mode="plan",
                outcome="held",
            )
        ]
    )
    assert SECRET not in (tmp_path / "audit.jsonl").read_text()
    assert log.read()[0]["reason"] == "history unavailable: http://u:***@prom failed"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_loop_cycle_against_a_password_url_never_shows_the_password(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Prometheus is down: the loop holds, and says so on stdout and in the audit log, URL redacted."""
    url = f"http://admin:{SECRET}@127.0.0.1:{_closed_port()}"
    queues = tmp_path / "queues.json"
    queues.write_text(json.dumps({"items": [queue_object("team-a", deserved=8, capability=16)]}))
    monkeypatch.setenv("PREDICTOR_PROMETHEUS__URL", url)
    monkeypatch.setenv("PREDICTOR_PROMETHEUS__RETRIES", "0")
    monkeypatch.setenv("PREDICTOR_ACTUATORS__AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    monkeypatch.setenv("PREDICTOR_ACTUATORS__PLAN_DIR", str(tmp_path / "plans"))
    rc = main(["loop", "--once", "--queues", str(queues), "--model", "seasonal_naive_24"])
    out, err = capsys.readouterr()
    audit = (tmp_path / "audit.jsonl").read_text()
    assert rc == 0, err
    assert "admin:***@127.0.0.1" in out and "admin:***@127.0.0.1" in audit  # where it went is still said
    assert SECRET not in out + err + audit


def test_a_cli_error_naming_a_password_url_is_redacted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url = f"http://admin:{SECRET}@127.0.0.1:{_closed_port()}"
    rc = main(["report", "--prometheus-url", url, "--out", str(tmp_path / "r")])
    out, err = capsys.readouterr()
    assert rc == 1 and err.startswith("error: ") and "admin:***@127.0.0.1" in err
    assert SECRET not in out + err
