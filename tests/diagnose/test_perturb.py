"""The training windows' perturbations come from the scenario's seed alone: the same in every process."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Hot-but-healthy GPUs on a small simulated cluster; prints which GPUs run how much hotter.
_HOT_GPUS = """
import numpy as np
from pipelines.rca_data import Scenario, simulate_scenario, to_window_data
from pipelines.rca_perturb import perturb
s = Scenario(seed=240, nodes=4, fault_rate_per_day=0.0, days=0.05, hot_gpus=0.5)
before = to_window_data(simulate_scenario(s))
hotter = before.tables["DCGM_FI_DEV_GPU_TEMP"].values.copy()
after = perturb(before, s).tables["DCGM_FI_DEV_GPU_TEMP"].values
print(np.round(np.nanmax(after - hotter, axis=0), 3).tolist())
"""


def _hot_gpus(hash_seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", _HOT_GPUS], env=env, capture_output=True, text=True, check=True)
    return done.stdout


def test_hot_gpus_are_the_same_whatever_the_processs_string_hashing() -> None:
    # Python salts string hashes per process: a draw made while iterating a set of GPU names would differ.
    first = _hot_gpus("1")
    assert any(rise >= 8 for rise in ast.literal_eval(first))  # some GPUs do run 8-16 °C hotter
    assert _hot_gpus("2") == first
    assert _hot_gpus("3") == first
