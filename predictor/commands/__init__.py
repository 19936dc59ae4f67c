"""CLI commands, one module per command (or family of commands); ``predictor.cli`` lists them lazily.

How a command is added (the one registration style):

1. Write the command as a plain module-level function in ``predictor/commands/<name>.py`` (a group of
   subcommands is a module-level ``typer.Typer``, as ``xdp_app``). Import at module level only what
   ``--help`` needs (typer, ``_common``, ``_options``); import pandas, models, pipelines, mlflow,
   kubernetes inside the function body, where the command runs.
2. Take shared flags from ``predictor.commands._options`` (``HistoryOption``, ``PrometheusUrlOption``,
   ...) rather than declaring ``--history`` or ``--prometheus-url`` again.
3. Add one ``LazyCommand(name, "predictor.commands.<module>:<function>", help)`` line to ``COMMANDS``
   below (``TRAIN_COMMANDS`` for ``predictor train <name>``). ``help`` is the first paragraph of the
   function's docstring, word for word: ``predictor --help`` shows it without importing the module,
   and ``tests/predictor/test_lazy_cli.py`` fails when the two differ.

Commands stay thin: build settings, call one function, print with rich. The module of a command is
imported only when that command runs or shows its own help, so ``predictor collect`` and
``predictor xdp agent`` (the node agents) start without the ML stack.
"""

from __future__ import annotations

from predictor.commands._lazy import LazyCommand

__all__ = ["COMMANDS", "TRAIN_COMMANDS"]

_C = "predictor.commands"

COMMANDS: tuple[LazyCommand, ...] = (
    LazyCommand(
        "export",
        f"{_C}.data:export",
        "Export a PromQL range query as a long frame (series_id, timestamp, value, labels).",
    ),
    LazyCommand(
        "demo", f"{_C}.demo:demo", "Run the main job end to end on embedded defaults: simulate, train, plan, report."
    ),
    LazyCommand(
        "simulate",
        f"{_C}.simulate:simulate",
        "Simulate a Volcano GPU cluster from a job table and write its Prometheus history.",
    ),
    LazyCommand(
        "collect",
        f"{_C}.collect:collect",
        "Serve DCGM-compatible GPU metrics read through NVML (for nodes without dcgm-exporter).",
    ),
    LazyCommand(
        "replay",
        f"{_C}.replay:replay",
        "Replay a job trace under a quota policy and write allocation, waits, reclaim losses and goodput.",
    ),
    LazyCommand(
        "forecast",
        f"{_C}.forecast:forecast",
        "Forecast every series of a history file: mean and lo/hi bands per level, `horizon` rows each.",
    ),
    LazyCommand(
        "backtest",
        f"{_C}.forecast:backtest",
        "Rolling-origin backtest: MAE, MASE, sMAPE, pinball, coverage per series and model.",
    ),
    LazyCommand(
        "retrain",
        f"{_C}.retrain:retrain_cmd",
        "Train model families, let each promote only a better challenger, print a summary.",
    ),
    LazyCommand(
        "plan",
        f"{_C}.loop:plan_command",
        "Plan Volcano queue quotas offline: writes the plan and the desired Queue objects, touches nothing.",
    ),
    LazyCommand(
        "loop",
        f"{_C}.loop:loop_command",
        "Forecast, plan, and recommend or resize the Volcano queues that opt in, every interval.",
    ),
    LazyCommand(
        "rollback",
        f"{_C}.rollback:rollback_command",
        "Restore the quota values a cycle replaced, from the audit log (dry run unless --apply).",
    ),
    LazyCommand(
        "demand",
        f"{_C}.demand:demand_command",
        "Predict each queue's GPU peak over the next hours with the gpu-demand champion (as registered).",
    ),
    LazyCommand(
        "rightsize",
        f"{_C}.rightsize:rightsize_cmd",
        "Recommend GPUs and GPU memory per workload at a stated risk, from what its runs really used.",
    ),
    LazyCommand(
        "diagnose",
        f"{_C}.diagnose:diagnose_cmd",
        "Name the likely cause of a slowdown in a window: cause, probability, scope, explanation.",
    ),
    LazyCommand(
        "report",
        f"{_C}.report:report",
        "Write the quota recommendation report (HTML with plots, Markdown, CSV, JSON) for every queue.",
    ),
    LazyCommand("train", f"{_C}.train:train_app", "Train a model family, backtest it and register it in MLflow."),
    LazyCommand(
        "xdp",
        f"{_C}.xdp:xdp_app",
        "XDP load-balancing profiles: load the program, switch profiles atomically, read stats.",
    ),
)

# `predictor train <name>`: each name needs an entry in retrain.FAMILIES (a test checks it).
TRAIN_COMMANDS: tuple[LazyCommand, ...] = (
    LazyCommand(
        "forecast",
        f"{_C}.forecast:train_forecast_cmd",
        "Fit, backtest, log to MLflow, register gpu-forecast; promote to champion only if better.",
    ),
    LazyCommand(
        "demand",
        f"{_C}.rightsize:train_demand_cmd",
        "Fit the demand regressors, backtest them against VPA/KRR, register gpu-demand, promote if better.",
    ),
    LazyCommand(
        "rca",
        f"{_C}.diagnose:train_rca_cmd",
        "Train a root-cause tree per metric-family profile (simulator + your incidents), log to MLflow `gpu-rca`.",
    ),
)
