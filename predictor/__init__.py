"""gpu-capacity-predictor: GPU demand prediction and capacity planning for Volcano-scheduled clusters.

The runtime package: data sources, registry, planner, loop, actuators, reports, simulator and CLI.
Training jobs live in ``pipelines`` and pure estimators in ``models``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("gpu-capacity-predictor")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
