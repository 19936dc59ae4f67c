"""Elastic-worker and power-cap advice on run tables whose behaviour is known."""

from __future__ import annotations

import numpy as np
import pandas as pd

from predictor.rightsize import RightsizeSettings, recommend
from tests.rightsize.test_risk import _runs


def test_elastic_worker_advice() -> None:
    """Four 2-GPU workers: a workload that keeps its GPUs barely busy is advised fewer workers with the
    slowdown range; one that keeps them busy keeps all four; a single-pod workload keeps one."""
    rng = np.random.default_rng(3)
    idle = _runs("idle", 0.3 + rng.normal(0, 0.01, 12), request=8.0).assign(pods=4, util_mean=15.0)
    busy = _runs("busy", 0.3 + rng.normal(0, 0.01, 12), request=8.0).assign(pods=4, util_mean=90.0)
    single = _runs("one", 0.3 + rng.normal(0, 0.01, 12), request=1.0)
    half = _runs("half", 0.3 + rng.normal(0, 0.01, 12), request=8.0).assign(pods=4, util_mean=90.0,
                                                                             gpus_used_p95=4.0)
    table = recommend(pd.concat([idle, busy, single, half], ignore_index=True), RightsizeSettings(risk=0.1))
    table = table.set_index("workload")
    assert table.loc["idle", "recommended_workers"] == 1  # ceil(4 × 15 % / 80 %)
    assert "minReplicas=1, maxReplicas=4" in str(table.loc["idle", "reason"])
    assert "slowdown 0 % to 300%" in str(table.loc["idle", "reason"])
    assert table.loc["busy", "recommended_workers"] == 4
    assert table.loc["one", "recommended_workers"] == 1
    assert table.loc["half", "recommended_workers"] == 2  # two workers' GPUs idle: no slowdown
    assert "expected slowdown 0 %" in str(table.loc["half", "reason"])
    assert "0 % to" not in str(table.loc["half", "reason"])


def test_power_cap_follows_utilisation() -> None:
    """Memory-bound work (low SM utilisation) gets a deep cap and saves energy within the slowdown budget;
    compute-bound work at the card's peak is barely capped; without power series there is no advice."""
    rng = np.random.default_rng(4)

    def with_power(name: str, util: float, watts: float) -> pd.DataFrame:
        runs = _runs(name, 0.3 + rng.normal(0, 0.01, 30), every_h=12.0)
        return runs.assign(util_mean=util, power_mean_w=watts, energy_kwh=watts * 2.0 / 1000)  # 2 h runs

    memory_bound = with_power("mem-bound", 25.0, 450.0)
    compute_bound = with_power("compute", 95.0, 690.0)
    settings = RightsizeSettings(risk=0.1)
    table = recommend(pd.concat([memory_bound, compute_bound], ignore_index=True), settings).set_index("workload")
    deep, shallow = table.loc["mem-bound"], table.loc["compute"]
    assert 0.5 * 690 <= deep["recommended_power_cap_w"] < 450
    assert deep["energy_saving_kwh_week"] > 1.0
    assert "slower" in str(deep["reason"])
    slowdown = float(str(deep["reason"]).split("about ")[1].split("%")[0]) / 100
    assert slowdown <= settings.energy.max_slowdown
    assert not shallow["energy_saving_kwh_week"] > deep["energy_saving_kwh_week"]
    plain = recommend(_runs("no-power", 0.3 + rng.normal(0, 0.01, 30)), settings)
    assert plain["recommended_power_cap_w"].isna().all() and plain["energy_saving_kwh_week"].isna().all()
