"""Bad inputs of simulate and replay: job tables and flags."""

from __future__ import annotations

import pytest

from tests.predictor.bad_inputs.inputs import Args, Files, Spoil, jobs_csv, out_is_a, replay, simulate, write
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
    # job tables: numbers and times bounded where they enter
    Case(
        "simulate-jobs-gpus-1e308",
        simulate,
        write("jobs.csv", jobs_csv("2026-01-01T00:00:00Z,a,1e308,3600")),
        "num_gpus",
    ),
    Case(
        "simulate-jobs-gpus-2e6", simulate, write("jobs.csv", jobs_csv("2026-01-01T00:00:00Z,a,2e6,3600")), "num_gpus"
    ),
    Case(
        "simulate-jobs-duration-inf",
        simulate,
        write("jobs.csv", jobs_csv("2026-01-01T00:00:00Z,a,1,inf")),
        "duration_s",
    ),
    Case("simulate-jobs-submit-2300", simulate, write("jobs.csv", jobs_csv("2300-01-01T00:00:00Z,a,1,60")), "outside"),
    Case(
        "simulate-nodes-200000",
        lambda f: [*simulate(f), "--nodes", "200000"],
        write("jobs.csv", jobs_csv("2026-01-01T00:00:00Z,a,1,60")),
        "GPUs",
    ),
    Case(
        "replay-jobs-gpus-1e308", replay, write("jobs.csv", jobs_csv("2026-01-01T00:00:00Z,a,1e308,3600")), "num_gpus"
    ),
    Case("replay-jobs-duration-inf", replay, write("jobs.csv", jobs_csv("2026-01-01T00:00:00Z,a,1,inf")), "duration_s"),
    Case("replay-jobs-submit-2300", replay, write("jobs.csv", jobs_csv("2300-01-01T00:00:00Z,a,1,60")), "outside"),
    Case(
        "replay-gpus-per-node-10000000",
        lambda f: [*replay(f), "--gpus-per-node", "10000000"],
        write("jobs.csv", jobs_csv("2026-01-01T00:00:00Z,a,1,60")),
        "GPUs",
    ),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("args", "spoil", "says"), params(CASES), ids=ids(CASES))
def test_bad_input(files: Files, capsys: pytest.CaptureFixture[str], args: Args, spoil: Spoil, says: str) -> None:
    run_case(files, capsys, args, spoil, says)
