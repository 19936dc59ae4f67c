"""Bad inputs of forecast, backtest, rightsize, diagnose and report."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.predictor.bad_inputs.inputs import (
    NOW,
    YEAR_2300,
    Args,
    Files,
    Spoil,
    backtest,
    forecast,
    history_csv,
    mixed_types_csv,
    out_is_a,
    train,
    write,
)
from tests.predictor.bad_inputs.runner import Case, ids, params, run_case


def _sparse_metrics(f: Files) -> None:
    """A simulator output directory whose first metric file is 17 GiB (sparse: refused before reading)."""
    metrics = f["out"].parent / "sim" / "metrics"
    metrics.mkdir(parents=True)
    with (metrics / "volcano_queue_allocated_scalar_resources.parquet").open("wb") as handle:
        handle.truncate(17 << 30)


CASES = [
    # forecast and backtest
    Case("forecast-history-negative", forecast, write("history.csv", history_csv([-1.0] * 48)), "negative"),
    Case("forecast-history-nan", forecast, write("history.csv", history_csv(["nan"] * 48)), "NaN"),
    Case("forecast-out-is-a-dir", forecast, out_is_a("dir", "fc.csv"), "is a directory"),
    Case(
        "forecast-out-bad-suffix",
        lambda f: [*forecast(f)[:3], "--out", str(f["out"] / "fc.txt"), *forecast(f)[5:]],
        None,
        "extension",
    ),
    Case("forecast-unknown-model", lambda f: [*forecast(f)[:-1], "no-such-model"], None, "no-such-model"),
    Case("forecast-history-not-csv", forecast, write("history.csv", "\x00\x01garbage"), "history.csv"),
    Case("backtest-history-inf", backtest, write("history.csv", history_csv(["-inf"] * 48)), "infinite"),
    Case("backtest-out-is-a-dir", backtest, out_is_a("dir", "bt.csv"), "is a directory"),
    # rightsize, diagnose, report, export, simulate
    Case(
        "rightsize-history-negative",
        lambda f: ["rightsize", "--history", str(f["history.csv"]), "--out", str(f["out"] / "rs.csv")],
        write("history.csv", history_csv([-2.0] * 48)),
        "negative",
    ),
    Case(
        "rightsize-history-mixed-types",
        lambda f: ["rightsize", "--history", str(f["history.csv"]), "--out", str(f["out"] / "rs.csv")],
        mixed_types_csv,
        "missing column",
    ),
    Case(
        "rightsize-missing-history",
        lambda f: ["rightsize", "--history", str(f["out"] / "none.csv"), "--out", str(f["out"] / "rs.csv")],
        None,
        "none.csv",
    ),
    Case(
        "diagnose-bad-at",
        lambda f: [
            "diagnose",
            "--history",
            str(f["history.csv"]),
            "--at",
            "whenever",
            "--out",
            str(f["out"] / "d.json"),
        ],
        None,
        "--at",
    ),
    Case(
        "diagnose-missing-history",
        lambda f: [
            "diagnose",
            "--history",
            str(f["out"] / "none.csv"),
            "--at",
            NOW.isoformat(),
            "--out",
            str(f["out"] / "d.json"),
        ],
        None,
        "none.csv",
    ),
    # a window with no node or queue to diagnose: the line must not blame a --scope nobody passed
    Case(
        "diagnose-nothing-to-diagnose",
        lambda f: [
            "diagnose",
            "--history",
            str(f["history.csv"]),
            "--at",
            NOW.isoformat(),
            "--out",
            str(f["out"] / "d.json"),
        ],
        write("history.csv", f'series_id,timestamp,value\nDCGM_FI_DEV_GPU_UTIL{{gpu="0"}},{NOW.isoformat()},50\n'),
        "no node, job or queue to diagnose between",
    ),
    Case(
        "report-missing-history",
        lambda f: ["report", "--history", str(f["out"] / "nowhere"), "--out", str(f["out"] / "report")],
        None,
        "nowhere",
    ),
    Case(
        "report-out-is-a-file",
        lambda f: ["report", "--history", str(f["out"].parent), "--out", str(f["out"])],
        out_is_a("file"),
        "not a directory",
    ),
    # horizons and times bounded where they enter
    Case(
        "forecast-horizon-100000000",
        lambda f: [*forecast(f)[:-4], "--horizon", "100000000", "--model", "naive"],
        None,
        "--horizon",
    ),
    Case(
        "backtest-horizon-100000000",
        lambda f: [*backtest(f)[:-6], "--horizon", "100000000", "--windows", "1", "--model", "naive"],
        None,
        "--horizon",
    ),
    Case(
        "forecast-ends-past-2262",
        forecast,
        write(
            "history.csv",
            history_csv(times=[t.isoformat() for t in pd.date_range(end="2262-04-10T23:00Z", periods=48, freq="h")]),
        ),
        "2262",
    ),
    Case(
        "forecast-history-year-2300",
        forecast,
        write(
            "history.csv",
            history_csv(times=YEAR_2300),
        ),
        "outside",
    ),
    # train: the same readers and bounds before anything reaches the registry
    Case(
        "train-forecast-horizon-100000000",
        lambda f: train(f, "forecast", "--history", str(f["history.csv"]), "--horizon", "100000000"),
        None,
        "--horizon",
    ),
    Case(
        "train-forecast-history-year-2300",
        lambda f: train(f, "forecast", "--history", str(f["history.csv"])),
        write(
            "history.csv",
            history_csv(times=YEAR_2300),
        ),
        "outside",
    ),
    Case(
        "train-demand-missing-history",
        lambda f: train(f, "demand", "--history", str(f["out"] / "none.csv")),
        None,
        "none.csv",
    ),
    Case(
        "train-rca-missing-incidents",
        lambda f: train(
            f, "rca", "--incidents", str(f["out"] / "none.csv"), "--history", str(f["history.csv"]), "--quick"
        ),
        None,
        "none.csv",
    ),
    Case(
        "report-metrics-too-large",
        lambda f: ["report", "--history", str(f["out"].parent / "sim"), "--out", str(f["out"] / "report")],
        _sparse_metrics,
        "above the 16 GiB limit",
    ),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("args", "spoil", "says"), params(CASES), ids=ids(CASES))
def test_bad_input(files: Files, capsys: pytest.CaptureFixture[str], args: Args, spoil: Spoil, says: str) -> None:
    run_case(files, capsys, args, spoil, says)
