"""PrometheusSource and ``predictor export`` against a real Prometheus backfilled by promtool.

Faults (503, 422, slow answers) come from a loopback proxy in front of the real server, never from a
mocked client.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import numpy as np
import pandas as pd
import pytest

from predictor.cli import main
from predictor.config import PrometheusSettings
from predictor.errors import InputError, QueryError, TemporaryDataSourceError
from predictor.sources import PrometheusSource, Selector
from tests.sources.openmetrics import Series, write_openmetrics
from tests.sources.proxy import FaultProxy
from tests.support.localprom import LocalPrometheus, free_port

T0 = int(pd.Timestamp("2026-10-01T00:00:00Z").timestamp())
DAYS = 10
STEP = 60
ODD_QUEUE = 'a"b\\c}d'


def _expected() -> list[Series]:
    rng = np.random.default_rng(7)
    stamps = range(T0, T0 + DAYS * 86400 + 1, STEP)
    series = [
        Series("gcp_test_gpus", {"queue": q, "node": n})
        for q, n in (("alpha", "n1"), ("beta", "n1"), (ODD_QUEUE, "n2"))
    ]
    for item in series:
        values = np.round(rng.uniform(0, 64, len(stamps)), 3)
        item.samples = list(zip(stamps, values.tolist(), strict=True))
    special = Series("gcp_test_special", {"queue": "alpha"})
    special.samples = [(T0 + i * STEP, v) for i, v in enumerate([1.0, math.nan, math.inf, -math.inf, 2.5])]
    return [*series, special]


@pytest.fixture(scope="module")
def expected() -> list[Series]:
    return _expected()


@pytest.fixture(scope="module")
def prom(
    prometheus_from_openmetrics: object, tmp_path_factory: pytest.TempPathFactory, expected: list[Series]
) -> LocalPrometheus:
    path = write_openmetrics(expected, tmp_path_factory.mktemp("om") / "history.om")
    return prometheus_from_openmetrics(path)  # type: ignore[operator,no-any-return]


@pytest.fixture
def proxy(prom: LocalPrometheus) -> Iterator[FaultProxy]:
    with FaultProxy(prom.url) as running:
        yield running


def _frame_of(series: Series) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "timestamp": pd.to_datetime([s for s, _ in series.samples], unit="s", utc=True),
            "value": [v for _, v in series.samples],
        }
    )


def _source(url: str, **settings: object) -> PrometheusSource:
    return PrometheusSource(PrometheusSettings(url=url, backoff_s=0.05, **settings))  # type: ignore[arg-type]


def test_export_returns_exactly_the_backfilled_samples_across_chunks(
    prom: LocalPrometheus, expected: list[Series], tmp_path: Path
) -> None:
    out = tmp_path / "gpus.csv"
    end = pd.Timestamp(T0 + DAYS * 86400, unit="s", tz="UTC").isoformat()
    start = pd.Timestamp(T0, unit="s", tz="UTC").isoformat()
    # 10 days at 1 m = 14,401 points per series: more than one request's 11,000.
    rc = main(
        [
            "export",
            "--prometheus-url",
            prom.url,
            "--query",
            "gcp_test_gpus",
            "--start",
            start,
            "--end",
            end,
            "--step",
            "1m",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    got = pd.read_csv(out, keep_default_na=False, na_values=[""])
    assert set(got.columns) >= {"series_id", "timestamp", "value", "__name__", "queue", "node"}
    assert got["series_id"].nunique() == 3
    for series in expected[:3]:
        rows = got[(got["queue"] == series.labels["queue"]) & (got["node"] == series.labels["node"])]
        want = _frame_of(series)
        assert len(rows) == len(want) == DAYS * 1440 + 1
        assert (pd.to_datetime(rows["timestamp"], utc=True).to_numpy() == want["timestamp"].to_numpy()).all()
        np.testing.assert_array_equal(rows["value"].to_numpy(), want["value"].to_numpy())
    assert rows["timestamp"].iloc[0].endswith("Z")


def test_small_chunks_have_no_duplicate_or_missing_sample_at_the_seams(
    proxy: FaultProxy, expected: list[Series]
) -> None:
    source = _source(proxy.url, max_points_per_request=97)
    start = pd.Timestamp(T0, unit="s", tz="UTC")
    frame = source.query_range(
        Selector.of("gcp_test_gpus", queue="alpha"), start, start + pd.Timedelta(days=1), pd.Timedelta(minutes=1)
    )
    want = _frame_of(expected[0]).iloc[:1441]
    assert frame["timestamp"].is_unique
    np.testing.assert_array_equal(frame["timestamp"].to_numpy(), want["timestamp"].to_numpy())
    np.testing.assert_array_equal(frame["value"].to_numpy(), want["value"].to_numpy())
    requests_made = proxy.queries()
    assert len(requests_made) == math.ceil(1441 / 97)
    for seen in requests_made:
        params = {k: float(v[0]) for k, v in parse_qs(urlparse(seen.path).query).items() if k != "query"}
        assert (params["end"] - params["start"]) / params["step"] + 1 <= 97


def test_label_values_are_escaped_so_odd_names_match_exactly(prom: LocalPrometheus) -> None:
    source = _source(prom.url)
    start = pd.Timestamp(T0, unit="s", tz="UTC")
    frame = source.query_range(
        Selector.of("gcp_test_gpus", queue=ODD_QUEUE), start, start + pd.Timedelta(hours=1), pd.Timedelta(minutes=1)
    )
    assert set(frame["queue"]) == {ODD_QUEUE}
    assert frame["series_id"].iloc[0] == 'gcp_test_gpus{node="n2",queue="a\\"b\\\\c}d"}'
    # An injection attempt is just a value that matches nothing: empty, not other series.
    hostile = Selector.of("gcp_test_gpus", queue='alpha"} or vector(1) #')
    assert source.query_range(hostile, start, start + pd.Timedelta(hours=1), pd.Timedelta(minutes=1)).empty


def test_query_with_no_data_returns_an_empty_frame(prom: LocalPrometheus, tmp_path: Path) -> None:
    source = _source(prom.url)
    start = pd.Timestamp(T0, unit="s", tz="UTC")
    frame = source.query_range("no_such_metric", start, start + pd.Timedelta(hours=1), pd.Timedelta("1min"))
    assert frame.empty
    assert list(frame.columns)[:3] == ["series_id", "timestamp", "value"]
    assert str(frame["timestamp"].dtype) == "datetime64[ns, UTC]"


def test_nan_and_infinities_come_back_and_can_be_dropped(prom: LocalPrometheus) -> None:
    source = _source(prom.url)
    start = pd.Timestamp(T0, unit="s", tz="UTC")
    end = start + pd.Timedelta(minutes=4)
    frame = source.query_range("gcp_test_special", start, end, pd.Timedelta(minutes=1))
    values = frame["value"].tolist()
    assert values[0] == 1.0 and math.isnan(values[1]) and values[2:] == [math.inf, -math.inf, 2.5]
    kept = source.query_range("gcp_test_special", start, end, pd.Timedelta(minutes=1), drop_non_finite=True)
    assert kept["value"].tolist() == [1.0, 2.5]


def test_transient_503_is_retried_then_succeeds(proxy: FaultProxy) -> None:
    proxy.script.extend([503, 503])
    source = _source(proxy.url, retries=3)
    start = pd.Timestamp(T0, unit="s", tz="UTC")
    frame = source.query_range("gcp_test_special", start, start + pd.Timedelta(minutes=4), pd.Timedelta("1min"))
    assert len(frame) == 5
    assert len(proxy.queries()) == 3


def test_persistent_503_raises_after_the_retry_budget(proxy: FaultProxy) -> None:
    proxy.script.extend([503] * 10)
    source = _source(proxy.url, retries=2)
    start = pd.Timestamp(T0, unit="s", tz="UTC")
    with pytest.raises(TemporaryDataSourceError, match=r"failed 3 time.*HTTP 503"):
        source.query_range("gcp_test_special", start, start + pd.Timedelta(minutes=4), pd.Timedelta("1min"))
    assert len(proxy.queries()) == 3


def test_422_is_not_retried_and_names_the_query(proxy: FaultProxy) -> None:
    proxy.script.append(422)
    source = _source(proxy.url, retries=3)
    start = pd.Timestamp(T0, unit="s", tz="UTC")
    with pytest.raises(QueryError, match=r"rejected 'gcp_test_special' \(HTTP 422\): injected failure"):
        source.query_range("gcp_test_special", start, start + pd.Timedelta(minutes=4), pd.Timedelta("1min"))
    assert len(proxy.queries()) == 1


def test_real_bad_query_from_the_server_is_a_query_error(prom: LocalPrometheus) -> None:
    source = _source(prom.url)
    start = pd.Timestamp(T0, unit="s", tz="UTC")
    with pytest.raises(QueryError, match=r"rejected 'sum\(' \(HTTP 400\): .*parse error"):
        source.query_range("sum(", start, start + pd.Timedelta(minutes=4), pd.Timedelta("1min"))


def test_slow_answer_times_out_and_is_retried(proxy: FaultProxy) -> None:
    proxy.script.append(1.5)  # the first answer arrives after the 0.5 s timeout
    source = _source(proxy.url, retries=1, timeout_s=0.5)
    start = pd.Timestamp(T0, unit="s", tz="UTC")
    frame = source.query_range("gcp_test_special", start, start + pd.Timedelta(minutes=4), pd.Timedelta("1min"))
    assert len(frame) == 5
    assert len(proxy.queries()) == 2


def test_auth_and_tenant_headers_are_sent(proxy: FaultProxy, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    source = _source(proxy.url, bearer_token_file=token_file, headers={"X-Scope-OrgID": "team-a"})
    start = pd.Timestamp(T0, unit="s", tz="UTC")
    source.query_range("gcp_test_special", start, start + pd.Timedelta(minutes=1), pd.Timedelta("1min"))
    headers = proxy.queries()[-1].headers
    assert headers["Authorization"] == "Bearer s3cret-token"
    assert headers["X-Scope-OrgID"] == "team-a"


def test_export_to_unreachable_server_fails_in_one_line_within_the_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "never.parquet"
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    rc = main(
        [
            "export",
            "--prometheus-url",
            url,
            "--query",
            "up",
            "--start",
            "2026-10-01T00:00:00Z",
            "--end",
            "2026-10-02T00:00:00Z",
            "--out",
            str(out),
            "--retries",
            "2",
        ]
    )
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err.strip()
    assert rc == 1
    assert len(err.splitlines()) == 1
    assert err.startswith("error: Prometheus at") and "connection refused" in err
    assert "Traceback" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == []
    # default backoff 0.5 s, doubling: 0.5 + 1.0 between three attempts
    assert elapsed < 10


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--start", "yesterday-ish"], "--start 'yesterday-ish' is not an ISO 8601 time"),
        (["--end", "2026-09-01T00:00:00Z"], "--end 2026-09-01T00:00:00Z is before --start"),
        (["--out", "x.xlsx"], "unknown file extension '.xlsx'"),
        (["--step", "1 minute"], "--step '1 minute' is not a duration"),
    ],
)
def test_export_bad_input_is_one_line_and_writes_nothing(
    args: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    base = {
        "--prometheus-url": "http://127.0.0.1:1",
        "--query": "up",
        "--start": "2026-10-01T00:00:00Z",
        "--end": "2026-10-02T00:00:00Z",
        "--out": "out.csv",
    }
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    rc = main(["export", *[x for kv in base.items() for x in kv]])
    err = capsys.readouterr().err.strip()
    assert rc == 1
    assert message in err and len(err.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_step_must_be_whole_seconds(prom: LocalPrometheus) -> None:
    source = _source(prom.url)
    start = pd.Timestamp(T0, unit="s", tz="UTC")
    with pytest.raises(InputError, match="whole number of seconds"):
        source.query_range("up", start, start + pd.Timedelta(minutes=1), pd.Timedelta(milliseconds=1500))
