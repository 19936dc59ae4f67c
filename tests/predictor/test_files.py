"""Long-frame files: lenient reading with named errors, atomic writing."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from predictor.errors import InputError
from predictor.sources.files import FileSource, read_history, write_frame


def test_round_trip_csv_and_parquet(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "series_id": ["a", "a", "b"],
            "timestamp": pd.to_datetime(["2026-01-01T00:00", "2026-01-01T01:00", "2026-01-01T00:00"], utc=True).as_unit(
                "ns"
            ),
            "value": [1.5, 2.0, 3.25],
            "queue": ["q1", "q1", "q2"],
        }
    )
    for name in ("h.csv", "h.parquet"):
        path = write_frame(frame, tmp_path / name)
        back = read_history(path)
        pd.testing.assert_frame_equal(back, frame)
    assert "2026-01-01T00:00:00Z" in (tmp_path / "h.csv").read_text()


def test_naive_timestamps_are_utc_and_custom_columns_are_renamed(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text("when,gpus,team\n2026-01-01 00:00,4,x\n2026-01-01 01:00,5,x\n")
    frame = read_history(path, time_col="when", value_col="gpus", id_col="team")
    assert list(frame.columns[:3]) == ["series_id", "timestamp", "value"]
    assert frame["timestamp"].iloc[0] == pd.Timestamp("2026-01-01T00:00Z")
    assert frame["series_id"].tolist() == ["x", "x"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "the file is empty"),
        ("series_id,timestamp,value\n", "has no rows"),
        ("series_id,timestamp,value\na,2026-01-01,1\na,2026-01-01,2\n", "duplicate timestamp"),
        ("series_id,timestamp,value\na,2026-01-01,1\na,2026-01-02,lots\n", "not numeric (row 3: 'lots')"),
        ("series_id,timestamp,value\na,tomorrow,1\n", "not a timestamp"),
        ("series_id,time,value\na,2026-01-01,1\n", "missing column 'timestamp'"),
    ],
)
def test_bad_history_files_name_the_problem(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "h.csv"
    path.write_text(content)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_history(path)


def test_unknown_extension_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"unknown file extension '\.json'"):
        read_history(tmp_path / "h.json")
    with pytest.raises(InputError, match="no such file"):
        read_history(tmp_path / "h.csv")


def test_failed_write_leaves_no_file(tmp_path: Path) -> None:
    class Unwritable:
        pass

    frame = pd.DataFrame({"value": [Unwritable()]})
    with pytest.raises(Exception):  # noqa: B017 - pyarrow's own error; what matters is what is left
        write_frame(frame, tmp_path / "h.parquet")
    assert list(tmp_path.iterdir()) == []


def test_file_source_filters_by_name_and_window(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text(
        "series_id,timestamp,value,__name__\n"
        'up{job="a"},2026-01-01T00:00Z,1,up\nup{job="a"},2026-01-01T01:00Z,1,up\nother,2026-01-01T00:00Z,2,other\n'
    )
    source = FileSource(path)
    got = source.query_range("up", pd.Timestamp("2026-01-01T00:30Z"), pd.Timestamp("2026-01-02T00:00Z"))
    assert got["value"].tolist() == [1.0] and got["__name__"].tolist() == ["up"]
    assert source.query_range("nothing", pd.Timestamp("2026-01-01T00:00Z"), pd.Timestamp("2026-01-02T00:00Z")).empty
