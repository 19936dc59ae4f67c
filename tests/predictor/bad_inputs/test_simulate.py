"""Bad inputs of simulate and replay: job tables and flags."""

from __future__ import annotations

import pytest

from tests.predictor.bad_inputs.inputs import Args, Files, Spoil, out_is_a, write
from tests.predictor.bad_inputs.runner import Case, ids, params, run_case

CASES = [
    Case(
        "simulate-missing-jobs",
        lambda f: ["simulate", "--jobs", str(f["out"] / "none.csv"), "--out", str(f["out"] / "sim")],
        None,
        "none.csv",
    ),
    Case(
        "simulate-bad-jobs",
        lambda f: ["simulate", "--jobs", str(f["jobs.csv"]), "--weeks", "0.01", "--out", str(f["out"] / "sim")],
        write("jobs.csv", "nothing,useful\n1,2\n"),
        "jobs.csv",
    ),
    Case(
        "simulate-bad-step",
        lambda f: ["simulate", "--synthetic", "--step", "whenever", "--weeks", "0.01", "--out", str(f["out"] / "sim")],
        None,
        "--step",
    ),
    Case(
        "simulate-out-is-a-file",
        lambda f: ["simulate", "--synthetic", "--weeks", "0.01", "--out", str(f["out"])],
        out_is_a("file"),
        "not a directory",
    ),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("args", "spoil", "says"), params(CASES), ids=ids(CASES))
def test_bad_input(files: Files, capsys: pytest.CaptureFixture[str], args: Args, spoil: Spoil, says: str) -> None:
    run_case(files, capsys, args, spoil, says)
