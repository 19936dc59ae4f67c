"""The MLflow pyfunc wrapper around our own estimators (imported lazily: it imports mlflow).

A custom ``PythonModel`` instead of MLflow's torch/sklearn flavours: torch's flavour re-exports the network
through ``torch.export`` and the sklearn one through skops, and neither knows our forecast contract. This
keeps the estimator object itself (pickled by MLflow), so ``models:/gpu-forecast@champion`` returns the same
forecasts as the object that was logged.
"""

from __future__ import annotations

from typing import Any

import mlflow.pyfunc
import pandas as pd

__all__ = ["EstimatorModel"]

KINDS = ("forecast", "tabular")


class EstimatorModel(mlflow.pyfunc.PythonModel):  # type: ignore[misc,name-defined]
    """``kind="forecast"``: input ``{"horizon": [h], "levels": ["80,95"]}`` → forecast frame.
    ``kind="tabular"``: input rows → ``estimator.predict(rows)`` (the demand and root-cause families).
    """

    def __init__(self, estimator: Any, kind: str = "forecast") -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown model kind {kind!r} (known: {', '.join(KINDS)})")
        self.estimator = estimator
        self.kind = kind

    # MLflow 3 reads predict's annotations: a DataFrame hint means "no schema inference from hints"
    # (we pass an explicit signature); no hint at all would be inferred as Any, with a warning.
    def predict(self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> Any:
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
