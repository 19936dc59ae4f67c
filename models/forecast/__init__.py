"""Forecasting GPU demand: one contract, baselines, statsmodels models, a global LSTM and ``auto``.

Importing this package registers every forecaster with ``forecasters`` (explicitly, below), so
``forecasters.create("lstm")`` and the CLI's ``--model`` see the same names.
"""

from __future__ import annotations

from models.forecast import auto, baselines, decomposition, lstm, statistical, windows  # noqa: F401  (registers the forecasters)
from models.forecast.auto import AutoForecaster, plan_from_records
from models.forecast.auto_replay import records_for_auto
from models.forecast.backtest import BacktestResult, run_backtest, score_records, summarize
from models.forecast.base import BaseForecaster
from models.forecast.baselines import DriftForecaster, NaiveForecaster, SeasonalNaiveForecaster
from models.forecast.decomposition import LevelProfileForecaster
from models.forecast.lstm import LSTMForecaster
from models.forecast.prep import ForecastInputError, parse_freq, regularize
from models.forecast.registry import UnknownForecasterError, forecasters, serving_params
from models.forecast.statistical import ETSForecaster, MSTLForecaster
from models.forecast.windows import SeasonalWindowForecaster, WindowMeanForecaster

__all__ = [
    "AutoForecaster",
    "BacktestResult",
    "BaseForecaster",
    "DriftForecaster",
    "ETSForecaster",
    "ForecastInputError",
    "LSTMForecaster",
    "LevelProfileForecaster",
    "MSTLForecaster",
    "NaiveForecaster",
    "SeasonalNaiveForecaster",
    "SeasonalWindowForecaster",
    "UnknownForecasterError",
    "WindowMeanForecaster",
    "forecasters",
    "parse_freq",
    "plan_from_records",
    "records_for_auto",
    "regularize",
    "run_backtest",
    "score_records",
    "serving_params",
    "summarize",
]
