"""CLI command groups, one module each; ``predictor.cli`` wires them into one Typer app.

Each module exposes ``register(app, train)`` where ``train`` is the ``predictor train`` sub-app.
Commands stay thin: build settings, call one function, print with rich.
"""
