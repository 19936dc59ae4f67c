"""What a registered model serves: the estimator rebuilt from its state, behind MLflow's pyfunc ``predict``.

This module is also the ``loader_module`` every registered model's ``MLmodel`` names, so ``mlflow models
serve`` and ``mlflow.pyfunc.load_model`` read the same state files as ``ModelRegistry.load`` (MLflow then
pickles nothing: a loader-module pyfunc is code in this package plus data). ``ModelRegistry.load`` does not
go through MLflow's loader: it checks the directory's format and digest first (``modeldir``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from predictor.errors import ModelError, RegistryError

__all__ = ["ServedModel"]


class ServedModel:
    """``kind="forecast"``: input ``{"horizon": [h], "levels": ["80,95"]}`` → forecast frame.
    ``kind="tabular"``: input rows → ``estimator.predict(rows)`` (the demand and root-cause families).
    """

    def __init__(self, estimator: Any, kind: str = "forecast", version: str | None = None) -> None:
        from predictor.registry.modeldir import KINDS

        if kind not in KINDS:
            raise RegistryError(f"unknown model kind {kind!r} (known: {', '.join(KINDS)})")
        if kind == "forecast":
            from models.forecast.base import BaseForecaster

            if not isinstance(estimator, BaseForecaster):
                raise RegistryError(f"a forecast model holds a {type(estimator).__name__}, not a forecaster")
        self.estimator = estimator
        self.kind = kind
        self.version = version  # the registered version these state files are (None: not from a registry)

    def predict(self, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> Any:
        if self.kind == "tabular":
            return self.estimator.predict(model_input)
        frame = pd.DataFrame(model_input)
        if "horizon" not in frame.columns or frame.empty:
            raise ValueError("forecast model input needs a 'horizon' column with one row")
        horizon = int(frame["horizon"].iloc[0])
        levels: tuple[int, ...] = (80, 95)
        if "levels" in frame.columns and isinstance(frame["levels"].iloc[0], str):
            levels = tuple(int(v) for v in frame["levels"].iloc[0].split(",") if v.strip())
        return self.estimator.predict(horizon, level=levels)

    def forecast(self, history: pd.DataFrame, horizon: int, levels: tuple[int, ...] = (80, 95)) -> pd.DataFrame:
        """What the loop serves each cycle: the stored state updated with ``history`` (its newest window;
        nothing is refitted) and ``horizon`` steps forecast. The loop's ``RegistryForecaster`` and the replay
        both call this, so a replay plans from exactly the forecast the loop would serve."""
        if self.kind != "forecast":
            raise RegistryError(f"a {self.kind} model does not forecast")
        try:
            frame: pd.DataFrame = self.estimator.update(history).predict(horizon, level=levels)
        except (ValueError, ArithmeticError) as exc:
            raise ModelError(f"forecaster {type(self.estimator).__name__} failed: {exc}".splitlines()[0]) from exc
        return frame


def _load_pyfunc(data_path: str) -> ServedModel:
    """MLflow's entry point for a loader-module pyfunc; ``data_path`` is the model's ``state/`` directory.

    MLflow has no model-version tags to hand here, so only the format is checked, not the digest; the
    state is data either way.
    """
    from predictor.registry.modeldir import read_state_dir

    estimator, kind = read_state_dir(Path(data_path), what=str(data_path))
    return ServedModel(estimator, kind)
