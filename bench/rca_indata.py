"""Labelled windows of the independent fault model: healthy simulator history, faults from ``bench.rca_faults``.

The training simulator is run with no faults of its own (its jobs, queues and exporters give a realistic
healthy cluster), healthy look-alikes and the independent faults are applied to its matrices
(``bench.rca_inject``), and every window is featurised exactly as ``predictor diagnose`` does. Clusters
differ from the training catalogue in seed, size, queue count and job rate. Each scenario's rows are cached
as Parquet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bench.rca_faults import label_rows, plan_faults
from bench.rca_inject import confound, inject
from models.rca_features import mark_not_applicable, window_features, with_derived
from pipelines.rca_data import Scenario, simulate_scenario, to_window_data

__all__ = ["FORMAT", "IndependentScenario", "independent_rows", "independent_scenarios"]

FORMAT = 3  # bump when faults, injection or labelling change: cached rows are then rebuilt


@dataclass(frozen=True)
class IndependentScenario:
    seed: int
    nodes: int
    days: float = 0.5
    queues: int = 0
    jobs_per_hour: float = 25.0
    faults_per_node_day: float = 8.0
    cascades: int = 2

    @property
    def name(self) -> str:
        return f"ind{FORMAT}-seed{self.seed}-n{self.nodes}-d{self.days:g}-q{self.queues}-j{self.jobs_per_hour:g}"

    def simulator(self) -> Scenario:
        return Scenario(
            seed=self.seed,
            nodes=self.nodes,
            fault_rate_per_day=0.0,
            days=self.days,
            queues=self.queues,
            jobs_per_hour=self.jobs_per_hour,
        )


def independent_scenarios(seeds: list[int], sizes: tuple[int, ...], days: float) -> list[IndependentScenario]:
    """One cluster per seed, sizes, queue counts and job rates cycling across seeds."""
    queues, rates = (0, 5, 14), (20.0, 30.0, 40.0, 25.0)
    return [
        IndependentScenario(seed, sizes[i % len(sizes)], days, queues[i % len(queues)], rates[i % len(rates)])
        for i, seed in enumerate(seeds)
    ]


def scenario_rows(s: IndependentScenario, window: pd.Timedelta) -> pd.DataFrame:
    data = to_window_data(simulate_scenario(s.simulator()))
    confound(data, s.seed)
    steps = max(1, int(window / pd.Timedelta(np.median(np.diff(data.times)), unit="ns")))
    faults = plan_faults(data, s.seed, int(s.faults_per_node_day * s.nodes * s.days), steps, s.cascades)
    inject(data, faults, s.seed)
    first, last = (pd.Timestamp(int(t), tz="UTC") for t in (data.times[0], data.times[-1]))
    parts = [
        label_rows(window_features(data, at, window), faults, data.times, at, window).assign(at=at)
        for at in pd.date_range(first + 2 * window, last, freq=window)
    ]
    meta = pd.DataFrame(
        [
            {"fault_id": f.fault_id, "shape": f.shape, "phase": f.phase, "strength": f.strength, "n_gpus": len(f.gpus)}
            for f in faults
        ]
    ).drop_duplicates("fault_id")
    rows = pd.concat(parts, ignore_index=True).merge(meta, on="fault_id", how="left")
    return rows.assign(scenario=s.name, seed=s.seed, nodes=s.nodes)


def independent_rows(
    scenarios: list[IndependentScenario],
    window: pd.Timedelta,
    cache_dir: Path | None,
    progress: Callable[[str], None] = print,
) -> pd.DataFrame:
    parts = []
    for i, s in enumerate(scenarios):
        path = None if cache_dir is None else cache_dir / f"{s.name}-w{int(window.total_seconds())}.parquet"
        if path is not None and path.is_file():
            rows = pd.read_parquet(path)
        else:
            rows = scenario_rows(s, window)
            if path is not None:
                from predictor.atomicio import atomic_path

                path.parent.mkdir(parents=True, exist_ok=True)
                with atomic_path(path) as tmp:
                    rows.to_parquet(tmp)
        parts.append(rows)
        progress(f"  independent {i + 1}/{len(scenarios)} {s.name}: {len(rows):,d} rows")
    rows = pd.concat(parts, ignore_index=True)
    rows["phase"] = rows["phase"].fillna("")
    rows["shape"] = rows["shape"].fillna("")
    return with_derived(mark_not_applicable(rows))
