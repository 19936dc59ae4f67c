"""``predictor forecast`` / ``predictor backtest`` end to end on small files (in-process CLI)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from predictor.cli import main


def write_history(path: Path, hours: int = 24 * 16, tz: str | None = "+02:00") -> pd.DataFrame:
    rng = np.random.default_rng(1)
    t = pd.date_range("2026-02-02", periods=hours, freq="1h", tz="UTC")
    rows = []
    for sid, level in (("q/a", 30.0), ("q/b", 8.0)):
        values = level + 5 * np.sin(2 * np.pi * np.arange(hours) / 24) + rng.normal(0, 1, hours)
        rows.append(pd.DataFrame({"ts": t, "queue": sid, "gpus": values, "note": "x"}))
    frame = pd.concat(rows, ignore_index=True)
    frame = frame.drop(index=[5, 6, 7])  # missing hours
    stamps = frame["ts"].dt.tz_convert("Europe/Berlin") if tz else frame["ts"].dt.tz_localize(None)
    frame.assign(ts=stamps.map(lambda v: v.isoformat())).to_csv(path, index=False)
    return frame


ARGS = ["--time-col", "ts", "--id-col", "queue", "--value-col", "gpus"]


@pytest.mark.parametrize("tz", ["+02:00", None])
def test_forecast_writes_horizon_rows_per_series(tmp_path: Path, tz: str | None) -> None:
    history = write_history(tmp_path / "h.csv", tz=tz)
    out = tmp_path / "f.csv"
    code = main(
        [
            "forecast",
            "--history",
            str(tmp_path / "h.csv"),
            "--horizon",
            "48",
            "--out",
            str(out),
            "--model",
            "seasonal_naive",
            "--level",
            "80",
            "--level",
            "95",
            *ARGS,
        ]
    )
    assert code == 0
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["series_id", "timestamp", "mean", "lo-80", "hi-80", "lo-95", "hi-95"]
    assert frame.groupby("series_id").size().to_dict() == {"q/a": 48, "q/b": 48}
    first = pd.to_datetime(frame["timestamp"], utc=True).groupby(frame["series_id"]).min()
    last = history.groupby("queue")["ts"].max()
    assert (first == last + pd.Timedelta("1h")).all()
    assert (frame["lo-95"] <= frame["mean"]).all() and (frame["mean"] >= 0).all()


def test_auto_on_two_weeks_says_which_models_it_could_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_history(tmp_path / "h.csv", hours=24 * 14)
    out = tmp_path / "f.parquet"
    code = main(["forecast", "--history", str(tmp_path / "h.csv"), "--horizon", "168", "--out", str(out), *ARGS])
    assert code == 0
    assert len(pd.read_parquet(out)) == 2 * 168
    printed = capsys.readouterr().out
    assert "steps of history" in printed and "auto serves" in printed


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("ts,queue,gpus\n2026-01-01T00:00:00Z,a,1\n2026-01-01T00:00:00Z,a,2\n", "duplicate timestamp"),
        ("ts,queue,gpus\n2026-01-01T00:00:00Z,a,1\n2026-01-01T01:00:00Z,a,lots\n", "not numeric"),
        ("", "empty"),
    ],
)
def test_bad_input_is_one_line_exit_1_and_no_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    out = tmp_path / "f.csv"
    code = main(["forecast", "--history", str(path), "--horizon", "24", "--out", str(out), *ARGS])
    err = capsys.readouterr().err
    assert code == 1
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
    assert not list(tmp_path.glob(".f.csv*"))


def test_backtest_writes_and_prints_the_metrics_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_history(tmp_path / "h.csv")
    out = tmp_path / "m.csv"
    code = main(
        [
            "backtest",
            "--history",
            str(tmp_path / "h.csv"),
            "--horizon",
            "24",
            "--windows",
            "2",
            "--out",
            str(out),
            "--model",
            "naive",
            "--model",
            "seasonal_naive_24",
            *ARGS,
        ]
    )
    assert code == 0
    table = pd.read_csv(out)
    assert set(table["model"]) == {"naive", "seasonal_naive_24"}
    assert {"mae", "mase", "smape", "pinball_p90", "coverage_80", "coverage_95"} <= set(table.columns)
    assert len(table) == 4
    assert "seasonal_naive_24" in capsys.readouterr().out


def test_unknown_backtest_model_lists_known_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_history(tmp_path / "h.csv")
    code = main(
        [
            "backtest",
            "--history",
            str(tmp_path / "h.csv"),
            "--out",
            str(tmp_path / "m.csv"),
            "--model",
            "prophet",
            *ARGS,
        ]
    )
    assert code == 1
    assert "known: auto" in capsys.readouterr().err
