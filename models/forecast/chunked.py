"""A forecaster made of one fitted copy of a template per chunk of series: what a fanned-out training registers.

Why: training 2,000+ queues (many clusters) is split into chunks of series that fit independently, in this
process, in local processes or as Ray tasks (``pipelines.fanout``). Merging fitted models back into one is
not possible in general (a global model such as the LSTM learns from all the series it saw), so the chunks
stay separate models and this class routes each series to the copy that was fitted on it. The chunking is
a pure function of the history (``chunk_series``), so a serial run and a Ray run fit the same chunks and
register the same model. A history that makes a single chunk is served by the template itself (no wrapper),
exactly as before chunking existed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from sklearn.base import clone

from models.forecast.base import BaseForecaster, PointForecast
from models.forecast.prep import RegularSeries, to_frame
from models.frames import ID

__all__ = ["CLUSTER", "DEFAULT_CHUNK_SIZE", "ChunkedForecaster", "chunk_series"]

CLUSTER = "cluster"  # the label that separates clusters in a fleet's history, when it is there
DEFAULT_CHUNK_SIZE = 256  # series per task: big enough that a task outweighs its scheduling, small enough to spread


def chunk_series(history: pd.DataFrame, chunk_size: int = DEFAULT_CHUNK_SIZE) -> list[list[str]]:
    """Series ids in chunks of at most ``chunk_size``, per cluster when the history has a ``cluster`` column.

    Sorted, so the chunks depend only on which series (and clusters) there are, never on row order.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk size must be at least 1, got {chunk_size}")
    if CLUSTER in history.columns:
        pairs = history[[CLUSTER, ID]].drop_duplicates().astype(str)
        groups = [sorted(ids) for _, ids in sorted(pairs.groupby(CLUSTER)[ID])]
    else:
        groups = [sorted(history[ID].astype(str).unique())]
    return [group[i : i + chunk_size] for group in groups for i in range(0, len(group), chunk_size)]


class ChunkedForecaster(BaseForecaster):
    """``estimator`` fitted separately on each chunk of series (see the module docstring)."""

    def __init__(
        self, estimator: BaseForecaster | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE, freq: str = "1h"
    ) -> None:
        self.estimator = estimator
        self.chunk_size = chunk_size
        self.freq = freq

    def min_history(self) -> int:
        return self._template().min_history()

    def _template(self) -> BaseForecaster:
        if self.estimator is None:
            raise ValueError("ChunkedForecaster needs an estimator to fit on each chunk")
        return self.estimator

    def _fit_all(self, series: list[RegularSeries]) -> dict[str, Any]:
        """Serial fit, chunk by chunk (the fan-out fits the same chunks elsewhere and calls ``assemble``)."""
        frame = to_frame(series)
        parts = [
            clone(self._template()).fit(frame[frame[ID].astype(str).isin(ids)])
            for ids in chunk_series(frame, self.chunk_size)
        ]
        self.parts_ = parts
        return {sid: index for index, part in enumerate(parts) for sid in part.series_ids_}

    def assemble(self, parts: Sequence[BaseForecaster]) -> ChunkedForecaster:
        """Become the model whose chunks are the already fitted ``parts`` (what ``fit`` would have set)."""
        if not parts:
            raise ValueError("no fitted chunks to assemble")
        self.parts_ = list(parts)
        self.freq_ = parts[0].freq_
        self.series_ids_ = sorted(sid for part in parts for sid in part.series_ids_)  # as fit orders them
        self.last_timestamps_ = {sid: ts for part in parts for sid, ts in part.last_timestamps_.items()}
        self.last_values_ = {sid: v for part in parts for sid, v in part.last_values_.items()}
        self.states_ = {sid: index for index, part in enumerate(parts) for sid in part.series_ids_}
        return self

    def _update_all(self, series: list[RegularSeries]) -> dict[str, Any]:
        """Serving: each series goes to the chunk model fitted on it, updated with its frozen parameters.

        A series no chunk saw goes to the first chunk, whose own rule serves unseen series (``auto``: its
        pool); nothing is refitted. Only chunks with a series in ``series`` are kept in the served copy.
        """
        routed: dict[int, list[RegularSeries]] = {}
        for s in series:
            routed.setdefault(int(self.states_.get(s.series_id, 0)), []).append(s)
        self.parts_ = [self.parts_[index]._update_regular(group) for index, group in sorted(routed.items())]
        return {sid: index for index, part in enumerate(self.parts_) for sid in part.series_ids_}

    def _predict_all(self, horizon: int, levels: tuple[int, ...]) -> dict[str, PointForecast]:
        out: dict[str, PointForecast] = {}
        for part in self.parts_:
            out.update(part._predict_all(horizon, levels))
        return out
