"""Range queries against a Prometheus-compatible API, returned as one long history frame.

Built on prometheus-api-client's ``PrometheusConnect`` with three things it does not do for us:
- chunking: Prometheus refuses more than 11,000 points per series in one range query, so the range is
  cut on the step grid (chunk ``i`` ends one step before chunk ``i+1`` starts: no sample twice, none lost);
- one retry policy we control: the client's own urllib3 retries are switched off (they would multiply
  with ours and hide the real budget); connection errors, timeouts and 5xx are retried with doubling
  backoff, a 4xx is the query's fault and is raised at once, naming the query;
- a frame in the project's shape (``series_id, timestamp, value`` + one column per label), built only
  from an answer whose shape was checked (``promanswer``): a malformed one is a ``QueryError``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import requests
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect
from urllib3.util.retry import Retry

from models.frames import ID, TIME, VALUE, empty_history
from predictor.config import PrometheusSettings
from predictor.errors import InputError, QueryError, TemporaryDataSourceError
from predictor.sources.promanswer import matrix_series
from predictor.sources.promql import Selector, series_id

__all__ = ["PrometheusSource", "chunk_ranges"]

_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})


def chunk_ranges(
    start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta, max_points: int
) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """Cut ``[start, end]`` into ranges of at most ``max_points`` evaluation steps on one grid.

    Prometheus evaluates a range query at ``start + k·step`` up to ``end`` inclusive, so a chunk of
    ``max_points`` points spans ``(max_points - 1)·step`` and the next starts one step later.
    """
    if end < start:
        raise InputError(f"end {end.isoformat()} is before start {start.isoformat()}")
    span = step * (max_points - 1)
    chunks: list[tuple[pd.Timestamp, pd.Timestamp]] = []
    chunk_start = start
    while chunk_start <= end:
        chunk_end = min(chunk_start + span, end)
        chunks.append((chunk_start, chunk_end))
        chunk_start = chunk_start + span + step
    return chunks


def _as_utc(value: pd.Timestamp, name: str) -> pd.Timestamp:
    stamp = pd.Timestamp(value)
    if pd.isna(stamp):
        raise InputError(f"{name} is not a time")
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


class PrometheusSource:
    """A ``MetricSource`` over the Prometheus HTTP API (also Thanos, Mimir, VictoriaMetrics)."""

    def __init__(
        self,
        settings: PrometheusSettings,
        *,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self._sleep = sleep
        self._session = session or requests.Session()
        self._session.verify = str(settings.ca_file) if settings.ca_file else settings.verify_tls
        self._last_response: requests.Response | None = None
        self._session.hooks["response"].append(self._remember_response)
        headers = dict(settings.headers)
        token = settings.resolved_bearer_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        auth = None
        if settings.basic_auth_user and settings.basic_auth_password is not None:
            auth = (settings.basic_auth_user, settings.basic_auth_password.get_secret_value())
        self._client = PrometheusConnect(
            url=settings.url.rstrip("/"),
            headers=headers,
            disable_ssl=not settings.verify_tls,
            retry=Retry(total=0, connect=0, read=0, status=0, raise_on_status=False),
            auth=auth,  # type: ignore[arg-type]  # the stub says tuple, None means no auth
            session=self._session,
            timeout=settings.timeout_s,  # type: ignore[arg-type]  # the client accepts floats
        )

    def _remember_response(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        self._last_response = response

    def query_range(
        self,
        query: str | Selector,
        start: pd.Timestamp,
        end: pd.Timestamp,
        step: pd.Timedelta,
        *,
        drop_non_finite: bool = False,
    ) -> pd.DataFrame:
        """Samples of ``query`` on the grid ``start + k·step`` up to ``end``, as a long frame.

        A query with no data gives an empty frame. ``NaN``/``±Inf`` values come back as such unless
        ``drop_non_finite``; stale series simply end (the server applies staleness).
        """
        promql = str(query)
        start, end = _as_utc(start, "start"), _as_utc(end, "end")
        step = pd.Timedelta(step)
        if step <= pd.Timedelta(0) or step % pd.Timedelta(seconds=1) != pd.Timedelta(0):
            raise InputError(f"step {step} must be a positive whole number of seconds")
        start = start.floor("s")  # the client sends whole seconds; keep the grid aligned to them
        step_s = int(step.total_seconds())
        series: dict[tuple[tuple[str, str], ...], list[tuple[np.ndarray, np.ndarray]]] = {}
        for chunk_start, chunk_end in chunk_ranges(start, end, step, self.settings.max_points_per_request):
            result = self._with_retries(promql, self._fetch_chunk, promql, chunk_start, chunk_end, str(step_s))
            for key, stamps, samples in matrix_series(result, promql, self._last_answer):
                if stamps.size:
                    series.setdefault(key, []).append((stamps, samples))
        return self._to_frame(series, drop_non_finite)

    def _fetch_chunk(self, promql: str, start: pd.Timestamp, end: pd.Timestamp, step: str) -> object:
        try:
            result: object = self._client.custom_query_range(promql, start.to_pydatetime(), end.to_pydatetime(), step)
        except (KeyError, TypeError, IndexError):
            # The client indexes body["data"]["result"] blindly: a 200 without them is checked (and named)
            # by matrix_series, not retried.
            return None
        return result

    def _last_answer(self) -> object:
        """The last answer's parsed body (for saying what is wrong with a malformed one)."""
        try:
            return None if self._last_response is None else self._last_response.json()
        except ValueError:
            return None

    def _with_retries(self, promql: str, call: Callable[..., Any], *args: Any) -> Any:
        attempts = self.settings.retries + 1
        delay = self.settings.backoff_s
        last_problem = "no attempt made"
        for attempt in range(1, attempts + 1):
            self._last_response = None
            try:
                return call(*args)
            except requests.Timeout:
                last_problem = f"timed out after {self.settings.timeout_s:g} s"
            except requests.ConnectionError as exc:
                last_problem = _connection_problem(exc)
            except PrometheusApiClientException as exc:
                status, reason = self._response_error(exc)
                if status not in _TRANSIENT_STATUS:
                    raise QueryError(f"Prometheus rejected {promql!r} (HTTP {status}): {reason}") from exc
                last_problem = f"HTTP {status}: {reason}"
            except ValueError as exc:  # a 200 whose body is not the JSON the API promises
                raise QueryError(f"Prometheus returned an unreadable answer to {promql!r}: {exc}") from exc
            if attempt < attempts:
                self._sleep(delay)
                delay *= 2
        raise TemporaryDataSourceError(
            f"Prometheus at {self.settings.url} failed {attempts} time(s) for {promql!r}: {last_problem}"
        )

    def _response_error(self, exc: PrometheusApiClientException) -> tuple[int, str]:
        response = self._last_response
        if response is None:
            match = re.search(r"HTTP Status Code (\d+)", str(exc))
            return (int(match.group(1)) if match else 0), str(exc)
        try:
            body = response.json()
            reason = str(body.get("error") or body)
        except ValueError:
            reason = response.text.strip()[:300] or response.reason
        return response.status_code, reason.replace("\n", " ")

    @staticmethod
    def _to_frame(
        series: dict[tuple[tuple[str, str], ...], list[tuple[np.ndarray, np.ndarray]]],
        drop_non_finite: bool,
    ) -> pd.DataFrame:
        label_names = sorted({name for key in series for name, _ in key})
        if not series:
            return empty_history(label_names)
        # Build whole columns with numpy (one concatenate, one repeat per label) instead of a frame per
        # series: this is most of the client's cost over the server's on millions of samples.
        ordered = sorted(series.items(), key=lambda item: series_id(dict(item[0])))
        stamps_parts, value_parts, counts = [], [], []
        for _key, chunks in ordered:
            stamps = np.concatenate([c[0] for c in chunks])
            values = np.concatenate([c[1] for c in chunks])
            # Seams are disjoint by construction; this guards against a server repeating a boundary.
            keep = np.ones(stamps.size, dtype=bool)
            keep[1:] = np.diff(stamps) > 0
            if drop_non_finite:
                keep &= np.isfinite(values)
            stamps_parts.append(stamps[keep])
            value_parts.append(values[keep])
            counts.append(int(keep.sum()))
        nanos = np.round(np.concatenate(stamps_parts) * 1e3).astype("int64") * 1_000_000
        columns: dict[str, object] = {
            ID: np.repeat(np.array([series_id(dict(k)) for k, _ in ordered], dtype=object), counts),
            TIME: pd.DatetimeIndex(nanos.view("datetime64[ns]")).tz_localize("UTC"),
            VALUE: np.concatenate(value_parts),
        }
        for name in label_names:
            per_series = np.array([dict(k).get(name) for k, _ in ordered], dtype=object)
            columns[name] = np.repeat(per_series, counts)
        return pd.DataFrame(columns)


def _connection_problem(exc: requests.ConnectionError) -> str:
    text = str(exc)
    if "refused" in text.lower():
        return "connection refused"
    if "Name or service not known" in text or "resolve" in text.lower():
        return "host name does not resolve"
    return text.splitlines()[0][:200] if text else type(exc).__name__
