"""One-off experiments, kept so the measurements behind design decisions can be reproduced.

They are not benchmarks to rerun on every change: each answered one question (how to calibrate ``auto``'s
intervals, whether warm-starting the LSTM helps, how far an oracle gets on the simulated traces, whether
statsforecast beats the project's models) and most read the record cache that ``python -m bench.forecast``
fills. Run one from the repository root with ``python -m bench.experiments.<name> --help``.
"""
