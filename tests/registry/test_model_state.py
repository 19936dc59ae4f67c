"""Every registered model family goes into the real sqlite MLflow registry as data and comes back identical."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from models.demand_eval import RunDemandModel
from models.demand_features import EARLY_FEATURES, HISTORY_FEATURES
from models.forecast import BaseForecaster, NaiveForecaster, forecasters
from models.rca import CLASSES, RootCauseTree
from models.rca_features import FEATURE_NAMES
from models.rca_profiled import ProfiledRca, fit_profiled
from models.rca_profiles import PROFILES
from predictor.config import Settings
from predictor.errors import RegistryError
from predictor.registry import CHALLENGER, CHAMPION, ModelRegistry

H = 24
SMALL_LSTM = {"horizon": H, "lookback_days": 7, "hidden_size": 8, "max_epochs": 2, "batch_size": 128}
FORECASTERS: dict[str, dict[str, Any]] = {
    "naive": {},
    "drift": {},
    "seasonal_naive_24": {},
    "seasonal_naive_168": {},
    "ets": {},
    "mstl": {},
    "lstm": SMALL_LSTM,
    "auto": {
        "candidates": ("naive", "seasonal_naive_24", "ets", "mstl", "lstm"),
        "windows": 2,
        "horizon": H,
        "step": H,
        "candidate_params": {"lstm": SMALL_LSTM},
        "pool": ("lstm", "naive"),
        "pool_weights": (0.7, 0.3),
    },
}


@pytest.fixture(scope="module")
def history(daily_history: pd.DataFrame) -> pd.DataFrame:
    """The daily queues plus the warts the state must carry: a gap and a flat queue (ETS falls back)."""
    t = daily_history["timestamp"].drop_duplicates()
    flat = pd.DataFrame({"series_id": "queue/flat", "timestamp": t, "value": 0.0})
    frame = pd.concat([daily_history, flat], ignore_index=True)
    gap = (frame["series_id"] == "queue/a") & frame["timestamp"].between(t.iloc[100], t.iloc[104])
    return frame[~gap].reset_index(drop=True)


@pytest.fixture(scope="module")
def fitted(history: pd.DataFrame) -> dict[str, BaseForecaster]:
    return {name: forecasters.create(name, **params).fit(history) for name, params in FORECASTERS.items()}


def _register(settings: Settings, family: str, model: Any, kind: str = "forecast") -> Any:
    """Log as a training job would, promote, then load the champion in a fresh registry (a serving process)."""
    writer = ModelRegistry(settings.mlflow)
    info = writer.log_model(family, model, kind=kind, params={"model": type(model).__name__})
    writer.promote(family, info.version)
    served = ModelRegistry(settings.mlflow).load(family, CHAMPION)
    assert served.kind == kind and served.estimator is not model
    assert type(served.estimator) is type(model)
    return served


@pytest.mark.parametrize("name", FORECASTERS)
@pytest.mark.slow
def test_every_forecaster_round_trips_through_the_registry(
    name: str, fitted: dict[str, BaseForecaster], mlflow_tracking: Settings
) -> None:
    model = fitted[name]
    served = _register(mlflow_tracking, "gpu-forecast", model)
    back = served.estimator
    assert back.get_params() == model.get_params()
    for horizon, levels in ((H, (80, 95)), (6, (50, 90, 99))):
        pd.testing.assert_frame_equal(
            back.predict(horizon, level=levels), model.predict(horizon, level=levels), check_exact=True
        )
    pd.testing.assert_frame_equal(served.predict(pd.DataFrame({"horizon": [H]})), model.predict(H), check_exact=True)
    assert clone(back).get_params() == clone(model).get_params()  # what the loop refits each cycle
    if name in ("ets", "mstl"):  # both the statsmodels result and the persistence fallback travelled
        kinds = {sid: state.result is None for sid, state in back.states_.items()}
        assert kinds == {"queue/a": False, "queue/b": False, "queue/flat": True}
    if name == "auto":
        assert set(back.members_) == set(model.members_) and back.choices_ == model.choices_


def test_demand_model_round_trips_through_the_registry(mlflow_tracking: Settings) -> None:
    rng = np.random.default_rng(0)
    n = 240
    features = pd.DataFrame({c: rng.normal(size=n) for c in (*HISTORY_FEATURES, *EARLY_FEATURES)})
    features.loc[::5, "q_n"] = np.nan
    features["w_used_max"] = np.nan  # a feature never seen in training
    features["y_used_frac"] = np.clip(0.5 + 0.2 * features["gpu_request"] + rng.normal(0, 0.1, n), 0, 1)
    features["y_mem_frac"] = np.clip(0.3 + 0.1 * features["hour"] + rng.normal(0, 0.1, n), 0, 1)
    model = RunDemandModel(max_iter=25).fit(features)
    served = _register(mlflow_tracking, "gpu-demand", model, kind="tabular")
    pd.testing.assert_frame_equal(served.predict(features), model.predict(features), check_exact=True)


def test_root_cause_tree_round_trips_through_the_registry(mlflow_tracking: Settings) -> None:
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.normal(size=(200, 4)), columns=["gpu_temp_p95_max", "x1", "x2", "x3"])
    X.iloc[::9, 2] = np.nan
    y = np.array(CLASSES)[(X["gpu_temp_p95_max"] > 0).astype(int) + 2 * (X["x1"] > 0.5).astype(int)]
    model = RootCauseTree(cv=3, n_alphas=4).fit(X, y)
    served = _register(mlflow_tracking, "gpu-rca", model, kind="tabular")
    np.testing.assert_array_equal(served.estimator.predict_proba(X), model.predict_proba(X))
    assert served.estimator.explain(X) == model.explain(X)
    np.testing.assert_array_equal(served.predict(X), model.predict(X))


def test_profiled_root_cause_model_round_trips_through_the_registry(mlflow_tracking: Settings) -> None:
    rng = np.random.default_rng(2)
    X = pd.DataFrame(rng.normal(size=(240, len(FEATURE_NAMES))), columns=list(FEATURE_NAMES))
    y = np.where(
        X["gpu_temp_p95_max"] > 0.5, "gpu_thermal", np.where(X["nvlink_crc_rate_max"] > 0.8, "nvlink", "healthy")
    )
    profiles = {n: PROFILES[n] for n in ("dcgm-default", "everything")}
    model = fit_profiled(X.assign(label=y), profiles=profiles, model=RootCauseTree(cv=2, n_alphas=3))
    served = _register(mlflow_tracking, "gpu-rca", model, kind="tabular")
    assert isinstance(served.estimator, ProfiledRca) and served.estimator.reach == model.reach
    for name in profiles:
        np.testing.assert_array_equal(
            served.estimator.models[name].predict_proba(X), model.models[name].predict_proba(X)
        )
    # Served rows without the NVLink counters are answered by the dcgm-default tree.
    default = X.assign(**{c: np.nan for c in PROFILES["dcgm-default"].absent_features})
    np.testing.assert_array_equal(served.predict(default), model.models["dcgm-default"].predict(default))


def test_mlflow_own_loader_reads_the_same_state(mlflow_tracking: Settings, fitted: dict[str, BaseForecaster]) -> None:
    """``mlflow.pyfunc.load_model`` (``mlflow models serve``) goes through our loader module: data, no pickle."""
    import mlflow

    model = fitted["naive"]
    _register(mlflow_tracking, "gpu-forecast", model)
    previous = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    mlflow.set_tracking_uri(mlflow_tracking.mlflow.tracking_uri)
    mlflow.set_registry_uri(mlflow_tracking.mlflow.tracking_uri)
    try:
        loaded = mlflow.pyfunc.load_model("models:/gpu-forecast@champion")
    finally:
        mlflow.set_tracking_uri(previous[0])
        mlflow.set_registry_uri(previous[1])
    pd.testing.assert_frame_equal(loaded.predict(pd.DataFrame({"horizon": [H]})), model.predict(H))


def test_an_unstorable_model_is_refused_at_registration(
    mlflow_tracking: Settings, fitted: dict[str, BaseForecaster]
) -> None:
    class Custom(NaiveForecaster):
        pass

    model = Custom().fit(
        pd.DataFrame(
            {"series_id": "q", "timestamp": pd.date_range("2026-03-02", periods=48, freq="h", tz="UTC"), "value": 1.0}
        )
    )
    registry = ModelRegistry(mlflow_tracking.mlflow)
    with pytest.raises(
        RegistryError,
        match=r"cannot register Custom as data: cannot store estimator: .*Custom is not "
        r"a known state type",
    ):
        registry.log_model("gpu-forecast", model)
    assert registry.get("gpu-forecast", CHALLENGER) is None  # nothing was logged
