"""Chunks of series: what a fanned-out training fits separately, the same in every executor.

A user relies on: the chunks depend only on which series (and clusters) there are, not on row order; a
cluster's series never share a chunk with another cluster's; a model assembled from separately fitted
chunks forecasts exactly like one fitted chunk by chunk in one process; a single chunk is the plain model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models.forecast import SeasonalWindowForecaster
from models.forecast.chunked import ChunkedForecaster, chunk_series


def fleet(n: int = 5, clusters: int = 2) -> pd.DataFrame:
    t = pd.date_range("2026-03-02", periods=24 * 8, freq="h", tz="UTC")
    rng = np.random.default_rng(1)
    return pd.concat(
        [
            pd.DataFrame(
                {
                    "cluster": f"c{i % clusters}",
                    "series_id": f"q{i}",
                    "timestamp": t,
                    "value": 5 + i + rng.normal(0, 1, t.size),
                }
            )
            for i in range(n)
        ],
        ignore_index=True,
    )


def test_chunks_are_per_cluster_sorted_and_independent_of_row_order() -> None:
    frame = fleet()
    chunks = chunk_series(frame, 2)
    assert chunks == [["q0", "q2"], ["q4"], ["q1", "q3"]]
    assert chunk_series(frame.sample(frac=1, random_state=0), 2) == chunks
    assert chunk_series(frame.drop(columns="cluster"), 2) == [["q0", "q1"], ["q2", "q3"], ["q4"]]
    with pytest.raises(ValueError, match="at least 1"):
        chunk_series(frame, 0)


def test_a_model_assembled_from_chunks_forecasts_like_the_serial_fit() -> None:
    frame = fleet()
    template = SeasonalWindowForecaster(cycles=3)
    serial = ChunkedForecaster(template, chunk_size=2).fit(frame)
    parts = [
        SeasonalWindowForecaster(cycles=3).fit(frame[frame["series_id"].isin(ids)]) for ids in chunk_series(frame, 2)
    ]
    assembled = ChunkedForecaster(template, chunk_size=2).assemble(parts)
    pd.testing.assert_frame_equal(assembled.predict(24), serial.predict(24), check_exact=True)
    assert sorted(serial.predict(24)["series_id"].unique()) == [f"q{i}" for i in range(5)]


def test_a_chunked_model_is_served_by_update_without_refitting_any_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop serves a fanned-out champion like any other: each series through its own chunk, frozen."""
    from models.forecast.chunked import ChunkedForecaster
    from models.forecast.windows import SeasonalWindowForecaster

    t = pd.date_range("2026-03-02", periods=24 * 10, freq="h", tz="UTC")
    frame = pd.concat(
        [
            pd.DataFrame({"series_id": f"q{i}", "timestamp": t, "value": i + np.sin(np.arange(t.size) / 4)})
            for i in range(5)
        ],
        ignore_index=True,
    )
    fitted = ChunkedForecaster(SeasonalWindowForecaster(cycles=3), chunk_size=2).fit(frame)
    newer = frame.assign(timestamp=frame["timestamp"] + pd.Timedelta(days=1), value=frame["value"] * 2)
    newcomer = newer[newer["series_id"] == "q0"].assign(series_id="q9")
    monkeypatch.setattr(SeasonalWindowForecaster, "fit", lambda *a, **k: pytest.fail("served models never refit"))
    served = fitted.update(pd.concat([newer, newcomer], ignore_index=True))
    out = served.predict(6)
    assert sorted(out["series_id"].unique()) == [f"q{i}" for i in range(5)] + ["q9"]
    assert out["timestamp"].min() > newer["timestamp"].max()
    first = out[out["series_id"] == "q0"]["mean"].to_numpy()
    np.testing.assert_allclose(first, out[out["series_id"] == "q9"]["mean"].to_numpy())  # same data, same answer
    assert len(fitted.parts_) == 3 and fitted.predict(6)["timestamp"].min() <= newer["timestamp"].max()
