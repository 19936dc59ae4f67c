"""Shared small simulation runs (session-scoped: a run is deterministic, so tests may share it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from predictor import sim

START = pd.Timestamp("2026-03-02", tz="UTC")


@pytest.fixture(scope="session")
def small_run() -> sim.SimResult:
    jobs = sim.synthetic_jobs(START - pd.Timedelta(days=1), START + pd.Timedelta(days=2), seed=7, jobs_per_hour=25)
    settings = sim.SimSettings(start=START, weeks=2 / 7, step_s=300, seed=7, fault_rate_per_day=40, warmup_days=1)
    return sim.simulate(jobs, sim.ClusterSpec.uniform(8), settings)


@pytest.fixture(scope="session")
def small_out(small_run: sim.SimResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("small-sim")
    small_run.write(out, openmetrics=True, parquet=True)
    return out


@pytest.fixture(scope="session")
def signatures() -> Any:
    """The fault-signature checks (a module beside this conftest; tests here are not a package)."""
    spec = importlib.util.spec_from_file_location("sim_signatures", Path(__file__).with_name("sim_signatures.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
