"""``predictor report``: a bad invocation is one line on stderr and exit code 1, with nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from predictor.cli import main


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "give exactly one of --history DIR or --prometheus-url URL"),
        (["--history", "X", "--prometheus-url", "http://127.0.0.1:1"], "give exactly one of"),
        (["--history", "MISSING"], "no such directory"),
    ],
)
def test_bad_invocation_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    out = tmp_path / "report"
    args = [a.replace("MISSING", str(tmp_path / "missing")).replace("X", str(tmp_path)) for a in extra]
    assert main(["report", "--out", str(out), *args]) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert not out.exists()
