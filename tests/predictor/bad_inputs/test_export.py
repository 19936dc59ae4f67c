"""Bad inputs of export: its flags and the Prometheus it reads."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.predictor.bad_inputs.inputs import NOW, Args, Files, Spoil
from tests.predictor.bad_inputs.runner import Case, ids, params, run_case

CASES = [
    Case(
        "export-bad-start",
        lambda f: [
            "export",
            "--query",
            "up",
            "--start",
            "nope",
            "--end",
            NOW.isoformat(),
            "--out",
            str(f["out"] / "e.csv"),
            "--prometheus-url",
            "http://127.0.0.1:9",
        ],
        None,
        "--start",
    ),
    Case(
        "export-end-before-start",
        lambda f: [
            "export",
            "--query",
            "up",
            "--start",
            NOW.isoformat(),
            "--end",
            (NOW - pd.Timedelta(hours=1)).isoformat(),
            "--out",
            str(f["out"] / "e.csv"),
            "--prometheus-url",
            "http://127.0.0.1:9",
        ],
        None,
        "end",
    ),
    Case(
        "export-bad-step",
        lambda f: [
            "export",
            "--query",
            "up",
            "--start",
            NOW.isoformat(),
            "--end",
            (NOW + pd.Timedelta(hours=1)).isoformat(),
            "--step",
            "fast",
            "--out",
            str(f["out"] / "e.csv"),
            "--prometheus-url",
            "http://127.0.0.1:9",
        ],
        None,
        "--step",
    ),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("args", "spoil", "says"), params(CASES), ids=ids(CASES))
def test_bad_input(files: Files, capsys: pytest.CaptureFixture[str], args: Args, spoil: Spoil, says: str) -> None:
    run_case(files, capsys, args, spoil, says)
