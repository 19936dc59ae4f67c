"""The scheduling loop: each cycle reads history, forecasts with the champion, plans and applies safely.

``Loop(settings, cluster=…, history=…, forecaster=…, actuator=…)`` is wired by the CLI (production) or by
tests and the replay benchmark (files, a fitted estimator, the simulator); ``run_once`` is one cycle.
A fleet (clusters in the settings) is ``predictor.loop.fleet.FleetLoop``: one ``Loop`` per cluster.
The public names are the submodules' own ``__all__`` lists (one list per name, no copy here).
"""

from __future__ import annotations

from predictor.loop import cycle, inputs, leader, metrics, seams
from predictor.loop.cycle import *  # noqa: F403
from predictor.loop.inputs import *  # noqa: F403
from predictor.loop.leader import *  # noqa: F403
from predictor.loop.metrics import *  # noqa: F403
from predictor.loop.seams import *  # noqa: F403

__all__: list[str] = []
__all__ += cycle.__all__
__all__ += inputs.__all__
__all__ += leader.__all__
__all__ += metrics.__all__
__all__ += seams.__all__
