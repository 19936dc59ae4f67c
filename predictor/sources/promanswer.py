"""The shape of a Prometheus range-query answer, checked before a sample is used.

A real Prometheus answers ``{"status": "success", "data": {"resultType": "matrix", "result": [...]}}`` with
each series a ``metric`` label map and ``values`` of ``[unix seconds, "value"]`` pairs. Anything else on the
port (a proxy's error page, another product, a truncated body) must become one ``QueryError`` line naming
the query, never a ``KeyError`` traceback or a silently empty export.

Values arrive as strings and Prometheus writes the special ones as ``"NaN"``, ``"+Inf"`` and ``"-Inf"``:
those are kept as float NaN/±Inf on purpose (a gauge can be NaN; callers decide, see ``drop_non_finite``).
A value that is not a number at all, or a timestamp outside the times pandas can hold, is refused.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from predictor.bounds import EARLIEST, LATEST
from predictor.errors import QueryError

__all__ = ["Series", "matrix_series"]

Series = tuple[tuple[tuple[str, str], ...], np.ndarray, np.ndarray]  # (sorted labels, stamps s, values)

_EARLIEST_S, _LATEST_S = EARLIEST.timestamp(), LATEST.timestamp()


class _ShapeError(Exception):
    """What is wrong with the answer, in words (becomes the QueryError's message)."""


def matrix_series(result: object, promql: str, answer: Callable[[], object]) -> list[Series]:
    """Each series of a range query's ``result`` list, checked; ``answer()`` parses the whole body (only
    called on a malformed answer, to say what is wrong with its envelope)."""
    try:
        if not isinstance(result, list):
            raise _ShapeError("no 'data.result' list")
        return [_series(i, item) for i, item in enumerate(result)]
    except _ShapeError as exc:
        problem = _envelope_problem(answer()) or str(exc)
        raise QueryError(f"Prometheus sent a malformed answer to {promql!r}: {problem}") from None


def _envelope_problem(body: object) -> str | None:
    if not isinstance(body, dict):
        return f"the answer is {type(body).__name__}, not a JSON object"
    if body.get("status") != "success":
        return f"status {body.get('status')!r}: {body.get('error') or 'no error given'}"
    data = body.get("data")
    if not isinstance(data, dict):
        return "the answer has no 'data' object" if data is None else f"'data' is {type(data).__name__}, not an object"
    if data.get("resultType") != "matrix":
        return f"resultType {data.get('resultType')!r}, expected 'matrix' for a range query"
    result = data.get("result")
    if not isinstance(result, list):
        return f"'data.result' is {'null' if result is None else type(result).__name__}, expected a list"
    return None


def _series(index: int, item: object) -> Series:
    where = f"series {index}"
    if not isinstance(item, dict):
        raise _ShapeError(f"{where} is {type(item).__name__}, not an object")
    metric = item.get("metric")
    if not isinstance(metric, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metric.items()):
        raise _ShapeError(f"{where} has no 'metric' object of label names to strings")
    values = item.get("values")
    if not isinstance(values, list):
        raise _ShapeError(f"{where}: 'values' is {type(values).__name__}, expected a list of [time, value] pairs")
    key = tuple(sorted(metric.items()))
    if not values:
        return key, np.empty(0), np.empty(0)
    pairs = np.array(values, dtype=object)
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        bad = next((i for i, v in enumerate(values) if not isinstance(v, list) or len(v) != 2), 0)
        raise _ShapeError(f"{where}: sample {bad} is {values[bad]!r}, not a [timestamp, value] pair")
    stamps = _column(pairs[:, 0], where, "timestamp")
    outside = ~np.isfinite(stamps) | (stamps < _EARLIEST_S) | (stamps > _LATEST_S)
    if outside.any():
        bad = int(outside.argmax())
        raise _ShapeError(
            f"{where}: sample {bad} has timestamp {stamps[bad]!r}, outside {EARLIEST:%Y-%m-%d} … {LATEST:%Y-%m-%d}"
        )
    return key, stamps, _column(pairs[:, 1], where, "value")


def _column(cells: np.ndarray, where: str, name: str) -> np.ndarray:
    """``cells`` as float64 ("NaN", "+Inf", "-Inf" included); a cell that is no number is refused by name."""
    try:
        return cells.astype("float64")
    except (TypeError, ValueError):
        for i, cell in enumerate(cells):
            try:
                if isinstance(cell, bool | list | dict) or cell is None:
                    raise TypeError
                float(cell)
            except (TypeError, ValueError):
                raise _ShapeError(f"{where}: sample {i} has {name} {cell!r}, not a number") from None
        raise _ShapeError(f"{where}: a {name} is not a number") from None
