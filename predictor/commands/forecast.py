"""CLI: ``predictor forecast``, ``predictor backtest`` and ``predictor train forecast``.

Thin by design (no logic of its own): parse flags, read the history file, call one function of
``pipelines.forecast``, write the result atomically and print. The heavy imports (torch, statsmodels,
mlflow) happen inside the commands so that ``predictor --help`` stays fast.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from predictor.commands._common import console, settings_from
from predictor.commands._fleet import ClusterOpt, check_cluster_option
from predictor.commands._options import HistoryFileOption, HistoryOption, TrackingUriOption
from predictor.errors import InputError
from predictor.registry import FORECAST_FAMILY

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["backtest", "forecast", "train_forecast_cmd"]


def _check_models(names: list[str] | None) -> list[str] | None:
    """``--model`` accepts every name in the forecasters registry (checked here, listed on a bad name)."""
    from models.forecast import forecasters

    unknown = [name for name in names or [] if name not in forecasters]
    if unknown:
        raise InputError(f"--model: unknown forecaster {unknown[0]!r} (known: {', '.join(forecasters.names())})")
    return names


def _check_model(name: str) -> str:
    _check_models([name])
    return name


def _check_freq(freq: str) -> str:
    from models.forecast import ForecastInputError, parse_freq

    try:
        parse_freq(freq)
    except ForecastInputError as exc:
        raise InputError(f"--freq: {exc}") from exc
    return freq


# The names are not listed in the help: they live in the forecasters registry, which imports torch.
_MODEL_HELP = "Forecaster name from the forecasters registry (an unknown name lists them all)"
ModelOpt = Annotated[str, typer.Option("--model", help=f"{_MODEL_HELP}.", callback=_check_model)]
ModelsOpt = Annotated[
    list[str] | None, typer.Option("--model", help=f"{_MODEL_HELP}; repeatable, default all.", callback=_check_models)
]
HorizonOpt = Annotated[
    int, typer.Option("--horizon", min=1, help="Steps ahead to forecast (at most 1344: eight weeks of hours).")
]
TimeColOpt = Annotated[str, typer.Option("--time-col", help="Timestamp column (naive = UTC).")]
IdColOpt = Annotated[str, typer.Option("--id-col", help="Series id column.")]
ValueColOpt = Annotated[str, typer.Option("--value-col", help="Value column.")]
FreqOpt = Annotated[str, typer.Option("--freq", help="Grid step of the series, e.g. 1h.", callback=_check_freq)]


def _read(history: Path, time_col: str, id_col: str, value_col: str) -> pd.DataFrame:
    """The history file with the user's column names mapped onto the long frame's."""
    from predictor.sources.files import read_history

    return read_history(history, time_col=time_col, id_col=id_col, value_col=value_col)


def _write(frame: pd.DataFrame, out: Path, rows: str) -> None:
    from predictor.sources.files import write_frame

    write_frame(frame, out)
    console.print(f"wrote {rows} to {out}", markup=False, soft_wrap=True)


def _print_table(frame: pd.DataFrame, title: str) -> None:
    """Plain aligned text: a metrics table is read in CI logs and terminals alike, never truncated."""
    console.print(title, markup=False, highlight=False, soft_wrap=True)
    text = frame.to_string(index=False, float_format=lambda v: f"{v:.3f}")
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def forecast(
    ctx: typer.Context,
    history: HistoryFileOption,
    out: Annotated[Path, typer.Option("--out", help="Output CSV/Parquet forecast file.")],
    horizon: HorizonOpt = 168,
    model: ModelOpt = "auto",
    level: Annotated[list[int] | None, typer.Option("--level", help="Interval level in percent (repeatable).")] = None,
    time_col: TimeColOpt = "timestamp",
    id_col: IdColOpt = "series_id",
    value_col: ValueColOpt = "value",
    freq: FreqOpt = "1h",
) -> None:
    """Forecast every series of a history file: mean and lo/hi bands per level, `horizon` rows each."""
    from pipelines.forecast import run_forecast

    settings_from(ctx)
    frame = _read(history, time_col, id_col, value_col)
    outcome = run_forecast(frame, model=model, horizon=horizon, levels=tuple(level or (80, 95)), freq=freq)
    for note in outcome.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    n_series = outcome.forecast["series_id"].nunique()
    _write(outcome.forecast, out, f"{len(outcome.forecast)} rows ({n_series} series × {horizon})")


def backtest(
    ctx: typer.Context,
    history: HistoryFileOption,
    out: Annotated[Path, typer.Option("--out", help="Output CSV/Parquet metrics table.")],
    horizon: HorizonOpt = 168,
    windows: Annotated[int, typer.Option("--windows", min=1, help="Backtest origins.")] = 4,
    step: Annotated[int | None, typer.Option("--step", min=1, help="Steps between origins.")] = None,
    model: ModelsOpt = None,
    time_col: TimeColOpt = "timestamp",
    id_col: IdColOpt = "series_id",
    value_col: ValueColOpt = "value",
    freq: FreqOpt = "1h",
) -> None:
    """Rolling-origin backtest: MAE, MASE, sMAPE, pinball, coverage per series and model."""
    from pipelines.forecast import backtest_table

    settings_from(ctx)
    frame = _read(history, time_col, id_col, value_col)
    table = backtest_table(frame, models=model or None, horizon=horizon, windows=windows, step=step, freq=freq)
    _print_table(table, f"backtest: h={horizon}, {windows} windows")
    _write(table, out, f"{len(table)} rows")


def train_forecast_cmd(
    ctx: typer.Context,
    history: HistoryOption = None,
    family: Annotated[str, typer.Option("--family", help="Series family: queue or cluster.")] = "queue",
    query: Annotated[str | None, typer.Option("--query", help="PromQL overriding the family's.")] = None,
    days: Annotated[int, typer.Option("--days", min=2, help="Days of Prometheus history.")] = 70,
    model: ModelOpt = "auto",
    horizon: HorizonOpt = 168,
    windows: Annotated[int, typer.Option("--windows", min=1, help="Backtest origins.")] = 4,
    tracking_uri: TrackingUriOption = None,
    time_col: TimeColOpt = "timestamp",
    id_col: IdColOpt = "series_id",
    value_col: ValueColOpt = "value",
    freq: FreqOpt = "1h",
    cluster: ClusterOpt = None,
) -> None:
    """Fit, backtest, log to MLflow, register gpu-forecast; promote to champion only if better.

    With clusters in the settings, trains on every cluster's (or each --cluster's) series, named
    cluster/queue."""
    import pandas as pd

    from pipelines.forecast import ForecastJob, load_prometheus_history, train_forecast

    settings = settings_from(ctx, mlflow={"tracking_uri": tracking_uri})
    check_cluster_option(settings, cluster, history)
    if history is not None:
        frame = _read(history, time_col, id_col, value_col)
    else:
        end = pd.Timestamp(datetime.now(UTC)).floor(freq)
        frame = load_prometheus_history(
            settings,
            family=family,
            query=query,
            start=end - timedelta(days=days),
            end=end,
            step=freq,
            clusters=cluster,
        )
    outcome = train_forecast(settings, frame, ForecastJob(model=model, horizon=horizon, windows=windows, freq=freq))
    verdict = "promoted to champion" if outcome.promoted else "kept as challenger"
    console.print(
        f"{FORECAST_FAMILY} v{outcome.version}: {verdict} ({outcome.reason})",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
