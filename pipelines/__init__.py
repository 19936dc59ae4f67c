"""Training jobs as plain functions: load → features → fit → backtest → log to MLflow → promote if better."""
