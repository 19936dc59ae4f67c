"""The allow-list of classes a model state may hold, and how the few that are not plain data are rebuilt.

Every class a registered estimator contains is named here, by its import path, and nothing else can be
stored or loaded (``models.state``). The table's keys are what the data names; its values import the
class from a fixed module path written here, so a name in a state file only ever selects an entry.

Most entries are plain classes (the forecasters, their per-series states, the demand models, scikit-learn's
histogram gradient boosting and its trees): their attributes are stored as data and set back on an
instance made without ``__init__``. The others are reduced to what determines their predictions and
rebuilt by calling their own constructors:

* the LSTM network: constructor sizes plus the ``state_dict`` tensors as arrays (no ``torch.load``);
* a statsmodels ETS result: the fitted series, the model's settings and its fitted parameters, refiltered
  with ``ETSModel.smooth(params)``, which is the call ``fit`` itself ends with, so forecasts are identical;
* scikit-learn's pinball loss (the quantile) and numpy's PCG64 generator (its state dict);
* the root-cause tree and the per-profile root-cause model: the JSON description each already has
  (``RootCauseTree.to_dict``, ``ProfiledRca.to_dict``).

The entries whose arrays compiled code walks (tree predictors, the boosting model and its binner, the
demand regressor, the root-cause trees, the LSTM) name a ``models.state_checks`` check, run on the rebuilt
object: a state that decodes but would crash or hang ``predict`` is refused when it is loaded.

Why plain arrays rather than skops for scikit-learn: one reader for every family with one allow-list we
own, a state that is numbers and names only, and no second deserialiser with its own trust rules (skops
rebuilds objects through their ``__setstate__``/``__reduce__`` paths for each type it trusts).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from models import state_checks
from models.state_base import StateDecoder as Decoder
from models.state_base import StateEncoder as Encoder
from models.state_base import StateError

__all__ = ["TYPES", "StateType"]


@dataclass(frozen=True)
class StateType:
    """One allowed class: where it lives, and (for non-plain classes) how it becomes data and back."""

    module: str
    qualname: str
    encode: Callable[[Any, Encoder, str], Any] | None = None
    decode: Callable[[Any, Decoder], Any] | None = None
    # run on the rebuilt object before anything uses it: raises StateCheckError if compiled code would
    # read past its arrays (``models.state_checks``)
    check: Callable[[Any], None] | None = None

    def cls(self) -> type:
        # module and qualname come from this file, never from the data being read
        obj: Any = importlib.import_module(self.module)
        for part in self.qualname.split("."):
            obj = getattr(obj, part)
        return obj  # type: ignore[no-any-return]


def _dict(state: Any, *keys: str) -> dict[str, Any]:
    if not isinstance(state, dict) or any(k not in state for k in keys):
        raise StateError(f"malformed state: expected the fields {', '.join(keys)}")
    return state


def _int(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise StateError(f"malformed state: {value!r} is not a size")
    return value


# --------------------------------------------------------------------------------------------- torch network
def _net_encode(net: Any, enc: Encoder, path: str) -> Any:
    hidden = int(net.encoder.hidden_size)
    weights = {k: t.detach().cpu().numpy() for k, t in net.state_dict().items()}
    return {
        "seq_features": int(net.encoder.input_size),
        "static_features": int(net.head[0].in_features) - hidden,
        "hidden": hidden,
        "horizon": int(net.horizon),
        "n_q": int(net.n_q),
        "weights": enc.value(weights, f"{path}.state_dict()"),
    }


def _net_decode(state: Any, dec: Decoder) -> Any:
    import torch

    from models.forecast.lstm import _Net

    s = _dict(state, "seq_features", "static_features", "hidden", "horizon", "n_q", "weights")
    weights = dec.value(s["weights"])
    if not isinstance(weights, dict) or not all(isinstance(v, np.ndarray) for v in weights.values()):
        raise StateError("malformed state: LSTM weights are not a dict of arrays")
    # building the module draws its initial weights from torch's global generator: keep that unchanged
    with torch.random.fork_rng(devices=[]):
        net = _Net(*(_int(s[k]) for k in ("seq_features", "static_features", "hidden", "horizon", "n_q")))
    net.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)
    return net.eval()


# --------------------------------------------------------------------------------------------- statsmodels ETS
def _ets_encode(result: Any, enc: Encoder, path: str) -> Any:
    model = result.model
    if model.initialization_method != "estimated" or model._has_fixed_params:
        raise StateError(
            f"cannot store {path}: only ETS fits with estimated initial states and no fixed parameters can be stored"
        )
    return {
        "endog": enc.value(np.asarray(model.endog, dtype=np.float64), f"{path}.model.endog"),
        "error": model.error,
        "trend": model.trend,
        "damped_trend": bool(model.damped_trend),
        "seasonal": model.seasonal,
        "seasonal_periods": int(model.seasonal_periods) if model.seasonal else None,
        "params": enc.value(np.asarray(result.params, dtype=np.float64), f"{path}.params"),
    }


def _ets_decode(state: Any, dec: Decoder) -> Any:
    import pandas as pd
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    from models.forecast.statistical import _quiet_fit

    s = _dict(state, "endog", "error", "trend", "damped_trend", "seasonal", "seasonal_periods", "params")
    endog, params = dec.value(s["endog"]), dec.value(s["params"])
    if not isinstance(endog, np.ndarray) or not isinstance(params, np.ndarray):
        raise StateError("malformed state: ETS series or parameters are not arrays")
    kwargs: dict[str, Any] = {"error": s["error"], "trend": s["trend"], "damped_trend": bool(s["damped_trend"])}
    if s["seasonal"] is not None:
        kwargs.update(seasonal=s["seasonal"], seasonal_periods=_int(s["seasonal_periods"]))
    # ETSModel validates every setting itself (unknown strings raise ValueError → StateError)
    return _quiet_fit(lambda: ETSModel(pd.Series(endog), **kwargs).smooth(params))


# --------------------------------------------------------------------------------------------- small pieces
def _pinball_encode(loss: Any, enc: Encoder, path: str) -> Any:
    return {"quantile": float(loss.closs.quantile), "constant_hessian": bool(loss.constant_hessian)}


def _pinball_decode(state: Any, dec: Decoder) -> Any:
    from sklearn._loss.loss import PinballLoss

    s = _dict(state, "quantile", "constant_hessian")
    loss = PinballLoss(sample_weight=None, quantile=float(s["quantile"]))
    loss.constant_hessian = bool(s["constant_hessian"])
    return loss


def _rng_encode(rng: np.random.Generator, enc: Encoder, path: str) -> Any:
    state = rng.bit_generator.state
    if state.get("bit_generator") != "PCG64":
        raise StateError(f"cannot store {path}: only PCG64 generators are supported")
    return enc.value(dict(state), f"{path}.bit_generator.state")


def _rng_decode(state: Any, dec: Decoder) -> Any:
    value = dec.value(state)
    if not isinstance(value, dict) or value.get("bit_generator") != "PCG64":
        raise StateError("malformed state: not a PCG64 generator state")
    bits = np.random.PCG64(0)
    bits.state = value  # type: ignore[assignment]  # numpy checks the dict's fields itself
    return np.random.Generator(bits)


def _rca_encode(model: Any, enc: Encoder, path: str) -> Any:
    return {"tree": enc.value(model.to_dict(), f"{path}.to_dict()")}


def _rca_decode(state: Any, dec: Decoder) -> Any:
    from models.rca import RootCauseTree

    tree = dec.value(_dict(state, "tree")["tree"])
    if not isinstance(tree, dict):
        raise StateError("malformed state: the root-cause tree is not a dict")
    return RootCauseTree.from_dict(tree)


def _rca_profiled_encode(model: Any, enc: Encoder, path: str) -> Any:
    return {"model": enc.value(model.to_dict(), f"{path}.to_dict()")}


def _rca_profiled_decode(state: Any, dec: Decoder) -> Any:
    from models.rca_profiled import ProfiledRca

    data = dec.value(_dict(state, "model")["model"])
    if not isinstance(data, dict):
        raise StateError("malformed state: the profiled root-cause model is not a dict")
    try:
        return ProfiledRca.from_dict(data)
    except ValueError as exc:
        raise StateError(f"malformed state: {exc}") from exc


def _plain(module: str, *names: str) -> dict[str, StateType]:
    return {f"{module}.{n}": StateType(module, n) for n in names}


_HGB = "sklearn.ensemble._hist_gradient_boosting"

TYPES: dict[str, StateType] = {
    **_plain("models.forecast.baselines", "NaiveForecaster", "DriftForecaster", "SeasonalNaiveForecaster"),
    **_plain("models.forecast.statistical", "ETSForecaster", "MSTLForecaster", "_EtsState"),
    **_plain("models.forecast.windows", "WindowMeanForecaster", "SeasonalWindowForecaster"),
    **_plain("models.forecast.decomposition", "LevelProfileForecaster"),
    **_plain("models.forecast.auto", "AutoForecaster", "SeriesPlan"),
    **_plain("models.forecast.lstm", "LSTMForecaster"),
    **_plain("models.forecast.chunked", "ChunkedForecaster"),
    **_plain("models.forecast.prep", "RegularSeries"),
    "models.demand.DemandRegressor": StateType(
        "models.demand", "DemandRegressor", check=state_checks.check_demand_regressor
    ),
    **_plain("models.demand_eval", "RunDemandModel", "RunModels"),
    f"{_HGB}.gradient_boosting.HistGradientBoostingRegressor": StateType(
        f"{_HGB}.gradient_boosting", "HistGradientBoostingRegressor", check=state_checks.check_hist_gradient_boosting
    ),
    f"{_HGB}.binning._BinMapper": StateType(f"{_HGB}.binning", "_BinMapper", check=state_checks.check_bin_mapper),
    f"{_HGB}.predictor.TreePredictor": StateType(
        f"{_HGB}.predictor", "TreePredictor", check=state_checks.check_tree_predictor
    ),
    "models.forecast.lstm._Net": StateType(
        "models.forecast.lstm", "_Net", _net_encode, _net_decode, check=state_checks.check_lstm
    ),
    "statsmodels.tsa.exponential_smoothing.ets.ETSResultsWrapper": StateType(
        "statsmodels.tsa.exponential_smoothing.ets", "ETSResultsWrapper", _ets_encode, _ets_decode
    ),
    "sklearn._loss.loss.PinballLoss": StateType("sklearn._loss.loss", "PinballLoss", _pinball_encode, _pinball_decode),
    "numpy.random._generator.Generator": StateType("numpy.random", "Generator", _rng_encode, _rng_decode),
    "models.rca.RootCauseTree": StateType(
        "models.rca", "RootCauseTree", _rca_encode, _rca_decode, check=state_checks.check_rca
    ),
    "models.rca_profiled.ProfiledRca": StateType(
        "models.rca_profiled",
        "ProfiledRca",
        _rca_profiled_encode,
        _rca_profiled_decode,
        check=state_checks.check_rca_profiled,
    ),
}
