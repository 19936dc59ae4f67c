"""Bad inputs of export: its flags and the Prometheus it reads."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pandas as pd
import pytest

from tests.predictor.bad_inputs.inputs import NOW, Args, Files, Spoil
from tests.predictor.bad_inputs.runner import Case, ids, params, run_case
from tests.sources.proxy import FaultProxy

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
    Case(
        "export-start-year-3000",
        lambda f: (
            [
                "export",
                "--query",
                "up",
                "--start",
                "3000-01-01",
                "--end",
                "3000-01-02",
                "--out",
                str(f["out"] / "e.csv"),
                "--prometheus-url",
                "http://127.0.0.1:9",
            ]
        ),
        None,
        "--start",
    ),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("args", "spoil", "says"), params(CASES), ids=ids(CASES))
def test_bad_input(files: Files, capsys: pytest.CaptureFixture[str], args: Args, spoil: Spoil, says: str) -> None:
    run_case(files, capsys, args, spoil, says)


def _matrix(*items: object, result_type: str = "matrix") -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": result_type, "result": list(items)}}).encode()


def _series(values: object, metric: object = None) -> dict[str, object]:
    return {"metric": {"__name__": "up"} if metric is None else metric, "values": values}


# Answers a real Prometheus never sends (a broken proxy, another product on the port): each must become one
# line naming the query, never a traceback and never a silently empty or wrong export.
MALFORMED: list[tuple[str, bytes, str]] = [
    ("no-data", b'{"status": "success"}', "data"),
    ("data-a-list", b'{"status": "success", "data": []}', "data"),
    ("result-null", b'{"status": "success", "data": {"resultType": "matrix", "result": null}}', "result"),
    ("result-a-string", b'{"status": "success", "data": {"resultType": "matrix", "result": "up"}}', "result"),
    ("status-error-on-200", b'{"status": "error", "error": "broken"}', "broken"),
    ("result-type-vector", _matrix({"metric": {}, "value": [1, "1"]}, result_type="vector"), "vector"),
    ("item-not-an-object", _matrix(42), "series 0"),
    ("no-metric", _matrix({"values": [[1767225600, "1"]]}), "metric"),
    ("metric-a-list", _matrix(_series([[1767225600, "1"]], metric=["up"])), "metric"),
    ("values-a-string", _matrix(_series("1,2,3")), "values"),
    ("sample-not-a-pair", _matrix(_series([[1767225600]])), "sample"),
    ("timestamp-a-word", _matrix(_series([["soon", "1"]])), "timestamp"),
    ("timestamp-inf", _matrix(_series([[1e400, "1"]])), "timestamp"),
    ("timestamp-year-3000", _matrix(_series([[32503680000, "1"]])), "timestamp"),
    ("value-a-word", _matrix(_series([[1767225600, "lots"]])), "value"),
    ("value-a-list", _matrix(_series([[1767225600, [1]]])), "value"),
]


@pytest.fixture
def answering(files: Files) -> Iterator[FaultProxy]:
    with FaultProxy("http://127.0.0.1:9") as proxy:
        yield proxy


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("body", "says"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_prometheus_answer(
    files: Files, capsys: pytest.CaptureFixture[str], answering: FaultProxy, body: bytes, says: str
) -> None:
    answering.script.append(body)

    def export(f: Files) -> list[str]:
        start = pd.Timestamp("2026-01-01T00:00:00Z")
        return [
            "export",
            "--query",
            "up",
            "--start",
            start.isoformat(),
            "--end",
            (start + pd.Timedelta(minutes=5)).isoformat(),
            "--out",
            str(f["out"] / "e.csv"),
            "--prometheus-url",
            answering.url,
        ]

    run_case(files, capsys, export, None, says)
    assert len(answering.queries()) == 1  # a malformed answer is the server's fault: never retried
