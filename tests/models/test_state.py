"""Model state as data (``models.state``): exact round trips, and refusals on anything not on the allow-list."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.numpy import load, save

from models.demand import DemandRegressor
from models.forecast import LSTMForecaster, NaiveForecaster, SeasonalWindowForecaster, WindowMeanForecaster
from models.state import STATE_FORMAT, StateError, from_state, to_state, type_name
from models.state_types import TYPES


def round_trip(obj: Any) -> Any:
    """Through strict JSON and safetensors bytes, as the registry stores it."""
    meta, arrays = to_state(obj)
    return from_state(json.loads(json.dumps(meta, allow_nan=False)), load(save(arrays)))


def test_the_allow_list_names_each_class_by_its_own_path() -> None:
    for name, entry in TYPES.items():
        assert type_name(entry.cls()) == name


def test_plain_values_round_trip_exactly() -> None:
    record = np.dtype([("value", "<f8"), ("count", "<u4"), ("flag", "u1")], align=True)
    nodes = np.zeros(3, dtype=record)
    nodes["value"], nodes["count"], nodes["flag"] = [1.5, -2.0, np.inf], [1, 2, 3], [0, 1, 0]
    value = {
        "floats": [0.1, float("nan"), float("inf"), -float("inf"), 1e308],
        "ints": (1, -(2**70), True, None),
        "keys": {1: "a", 2.5: "b", ("x", 1): "c", None: "d"},
        "scalars": [
            np.float64(0.1),
            np.float32(1.25),
            np.int64(-3),
            np.uint64(2**63 + 1),
            np.bool_(True),
            np.str_("q"),
        ],
        "arrays": [
            np.arange(6, dtype=np.int16).reshape(2, 3),
            np.array(3.0),
            np.zeros((0, 4), np.float32),
            np.array([True, False]),
            np.ones(2, np.float16),
            np.array(["a", "bcd"]),
            np.array(["x", 1, None], dtype=object),
            np.asfortranarray(np.eye(3)),
            np.arange(5.0)[::2],
            np.array([1, 2], dtype=">i4"),
            nodes,
            nodes[1:2].reshape(()),
            pd.date_range("2026-01-01", periods=3, freq="h").to_numpy(),
        ],
        "times": [
            pd.Timestamp("2026-03-02 05:00", tz="UTC"),
            pd.Timestamp("2026-03-02 05:00:00.000000001"),
            pd.Timestamp("2026-03-02", tz="Europe/Berlin").as_unit("s"),
            pd.Timedelta(hours=1),
            pd.Timedelta(1, unit="ns"),
        ],
    }
    back = round_trip(value)
    assert back["keys"] == value["keys"] and back["ints"] == value["ints"]
    np.testing.assert_array_equal(back["floats"], value["floats"])
    for got, want in zip(back["scalars"], value["scalars"], strict=True):
        assert type(got) is type(want) and got == want
    for got, want in zip(back["arrays"], value["arrays"], strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype.newbyteorder("=")
        if want.dtype.kind != "O":
            np.testing.assert_array_equal(got, want)
        else:
            assert got.tolist() == want.tolist()
        assert got.flags.writeable
    for got, want in zip(back["times"], value["times"], strict=True):
        assert type(got) is type(want) and got == want and got.unit == want.unit
        assert str(getattr(got, "tz", None)) == str(getattr(want, "tz", None))


def test_fitted_estimators_round_trip_with_identical_predictions() -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 3))
    X[::5, 1] = np.nan
    X[:, 2] = np.nan  # an empty feature, held constant by the regressor
    y = X[:, 0] + rng.normal(0, 0.1, 120)
    regressor = DemandRegressor(max_iter=20).fit(X, y)
    back = round_trip(regressor)
    assert type(back) is DemandRegressor and back.get_params() == regressor.get_params()
    np.testing.assert_array_equal(back.predict(X), regressor.predict(X))

    t = pd.date_range("2026-03-02", periods=24 * 10, freq="h", tz="UTC")
    frame = pd.DataFrame({"series_id": "q", "timestamp": t, "value": 10 + np.sin(np.arange(t.size) / 4)})
    for forecaster in (NaiveForecaster(), WindowMeanForecaster(window=24), SeasonalWindowForecaster(cycles=3)):
        fitted = forecaster.fit(frame)
        pd.testing.assert_frame_equal(round_trip(fitted).predict(12), fitted.predict(12), check_exact=True)


def test_loading_an_lstm_leaves_the_global_torch_generator_alone() -> None:
    t = pd.date_range("2026-03-02", periods=24 * 5, freq="h", tz="UTC")
    frame = pd.DataFrame({"series_id": "q", "timestamp": t, "value": 10 + np.sin(np.arange(t.size) / 4)})
    lstm = LSTMForecaster(horizon=12, lookback_days=2, hidden_size=4, max_epochs=1).fit(frame)
    meta, arrays = to_state(lstm)
    torch.manual_seed(5)
    before = torch.get_rng_state()
    back = from_state(meta, arrays)
    assert torch.equal(torch.get_rng_state(), before)
    pd.testing.assert_frame_equal(back.predict(12), lstm.predict(12), check_exact=True)


class _Subclass(NaiveForecaster):
    pass


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"x": [object()]}, "estimator['x'][0]: builtins.object is not a known state type"),
        ({1, 2}, "estimator: builtins.set"),
        (_Subclass(), "estimator: tests.models.test_state._Subclass is not a known state type"),
        (np.array([1 + 2j]), "estimator: arrays of dtype complex128"),
    ],
)
def test_an_unknown_type_is_refused_when_the_state_is_made(value: Any, where: str) -> None:
    with pytest.raises(StateError, match=f"cannot store {where}".replace("[", r"\[").replace("]", r"\]")):
        to_state(value)


def test_a_model_holding_an_unknown_object_is_refused_naming_where() -> None:
    t = pd.date_range("2026-03-02", periods=48, freq="h", tz="UTC")
    naive = NaiveForecaster().fit(pd.DataFrame({"series_id": "q", "timestamp": t, "value": 1.0}))
    naive.extra_ = {"hook": print}
    with pytest.raises(StateError, match=r"estimator\.extra_\['hook'\]: builtins\.builtin_function_or_method"):
        to_state(naive)
    naive.extra_ = [naive]
    with pytest.raises(StateError, match=r"estimator\.extra_\[0\]: it refers back to itself"):
        to_state(naive)


def _doc(root: Any) -> dict[str, Any]:
    return {"format": STATE_FORMAT, "root": root}


@pytest.mark.parametrize(
    ("meta", "arrays", "message"),
    [
        ({"format": "pickle"}, {}, "not a gpu-capacity-predictor/state/1 state"),
        (_doc({"$": "object", "type": "os.system", "state": "echo"}), {}, "unknown state type 'os.system'"),
        (_doc({"$": "object", "type": "builtins.eval", "state": {}}), {}, "unknown state type 'builtins.eval'"),
        (
            _doc(
                {
                    "$": "object",
                    "type": "models.forecast.baselines.NaiveForecaster",
                    "state": {"attrs": {"__class__": None}},
                }
            ),
            {},
            "attribute name '__class__'",
        ),
        (_doc({"$": "array", "dtype": "|O", "shape": [1], "ref": "a0"}), {"a0": np.zeros(1)}, "items"),
        (_doc({"$": "array", "dtype": "<f8", "shape": [2], "ref": "a0"}), {"a0": np.zeros(3)}, "described as"),
        (_doc({"$": "array", "dtype": "<f8", "shape": [1], "ref": "a1"}), {"a0": np.zeros(1)}, "no array 'a1'"),
        (_doc(None), {"a0": np.zeros(1)}, "arrays a0 are not referenced"),
        (
            _doc(
                {
                    "$": "object",
                    "type": "models.forecast.baselines.NaiveForecaster",
                    "state": {"attrs": {"predict": None}},
                }
            ),
            {},
            "attribute 'predict' would hide NaiveForecaster.predict",
        ),
        (_doc({"$": "timestamp", "ns": 0, "unit": "ns", "tz": "dateutil//etc/passwd"}), {}, "time zone"),
        (_doc({"$": "timestamp", "ns": 0, "unit": "ns", "tz": "../../etc/passwd"}), {}, "time zone"),
        (_doc({"$": "float", "v": "__import__('os')"}), {}, "malformed state: float"),
        (_doc({"$": "pickle", "v": "gASV"}), {}, "unknown tag 'pickle'"),
        (
            _doc({"$": "records", "fields": [["p", "|O", 0]], "itemsize": 8, "shape": [1], "ref": "a0"}),
            {"a0": np.zeros((1, 8), np.uint8)},
            "not allowed",
        ),
        (
            _doc(
                {
                    "$": "object",
                    "type": "models.forecast.lstm._Net",
                    "state": {
                        "seq_features": 2,
                        "static_features": 1,
                        "hidden": 2,
                        "horizon": 3,
                        "n_q": 1,
                        "weights": {"$": "dict", "items": []},
                    },
                }
            ),
            {},
            "malformed state: RuntimeError",
        ),
    ],
)
def test_a_state_that_is_not_ours_is_refused(meta: Any, arrays: dict[str, np.ndarray], message: str) -> None:
    with pytest.raises(StateError, match=message.replace("(", r"\(").replace(")", r"\)")):
        from_state(meta, arrays)


def test_the_demand_model_with_its_queue_regressor_round_trips() -> None:
    """The registered gpu-demand model carries the queue-peak regressor the loop serves; a version without
    one (registered before it existed) rebuilds with ``queue_model_ = None`` and says so when asked."""
    from models.demand_eval import RunDemandModel

    rng = np.random.default_rng(2)
    times = pd.date_range("2026-01-05", periods=24 * 12, freq="h", tz="UTC")
    frame = pd.concat(
        [
            pd.DataFrame(
                {
                    "series_id": q,
                    "timestamp": times,
                    "demand": level + rng.normal(0, 1, len(times)),
                    "pending": rng.integers(0, 4, len(times)).astype(float),
                }
            )
            for q, level in (("a", 8.0), ("b", 30.0))
        ]
    )
    model = RunDemandModel(max_iter=20).fit_queues(frame, horizon_h=12)
    back = round_trip(model)
    assert isinstance(back.queue_model_, DemandRegressor) and back.queue_horizon_h_ == 12
    pd.testing.assert_frame_equal(back.predict_queues(frame), model.predict_queues(frame), check_exact=True)
    bare = round_trip(RunDemandModel())
    assert bare.queue_model_ is None
    with pytest.raises(ValueError, match="no queue-peak regressor"):
        bare.predict_queues(frame)


def test_a_chunked_forecaster_round_trips_with_identical_predictions() -> None:
    """What a fanned-out training registers: one fitted copy per chunk of series, routed by series id."""
    from models.forecast.chunked import ChunkedForecaster

    t = pd.date_range("2026-03-02", periods=24 * 10, freq="h", tz="UTC")
    frame = pd.concat(
        [
            pd.DataFrame({"series_id": f"q{i}", "timestamp": t, "value": i + np.sin(np.arange(t.size) / 4)})
            for i in range(5)
        ],
        ignore_index=True,
    )
    fitted = ChunkedForecaster(SeasonalWindowForecaster(cycles=3), chunk_size=2).fit(frame)
    assert len(fitted.parts_) == 3
    back = round_trip(fitted)
    assert type(back) is ChunkedForecaster
    pd.testing.assert_frame_equal(back.predict(12), fitted.predict(12), check_exact=True)
