"""Root-cause diagnosis at runtime: window features from sources, the model to use, findings, band gauges.

The estimator and the feature definitions are pure and live in ``models.rca`` / ``models.rca_features``;
this package wires them to Prometheus, history files, the bundled default model and the loop's
``/metrics`` (forecast-band gauges for dynamic-threshold alerts). Feature table: ``FEATURES.md`` beside
this file. Training data from the simulator are ``pipelines.rca_data``: nothing here imports the simulator.
"""

from __future__ import annotations

from predictor.diagnose.bands import export_forecast_bands
from predictor.diagnose.engine import diagnose, fetch_window, history_window, parse_scope
from predictor.diagnose.models import FAMILY, load_default, load_model_file, load_registry, save_model_file

__all__ = [
    "FAMILY",
    "diagnose",
    "export_forecast_bands",
    "fetch_window",
    "history_window",
    "load_default",
    "load_model_file",
    "load_registry",
    "parse_scope",
    "save_model_file",
]
