"""The project's benchmarks, each a module run from the repository root: ``python -m bench.<name> --help``.

Every module's docstring says what it measures, how to run it and what its table means. Helpers shared by
several benchmarks (``forecast_traces``, ``forecast_cache``, ``forecast_report``, ...) are imported as
``bench.<helper>``. One-off experiments kept to reproduce design decisions live in ``bench.experiments``.
"""
