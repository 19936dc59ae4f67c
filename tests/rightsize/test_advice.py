"""Elastic-worker and power-cap advice on run tables whose behaviour is known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from predictor.rightsize import RightsizeSettings, from_frame, recommend, rightsize
from predictor.rightsize.elastic import idle_quota
from predictor.sources import read_metrics
from tests.rightsize.simdata import FAMILIES, START
from tests.rightsize.test_risk import _runs


def test_elastic_worker_advice() -> None:
    """Four 2-GPU workers: a workload that keeps its GPUs barely busy is advised fewer workers with the
    slowdown range; one that keeps them busy keeps all four; a single-pod workload keeps one."""
    rng = np.random.default_rng(3)
    idle = _runs("idle", 0.3 + rng.normal(0, 0.01, 12), request=8.0).assign(pods=4, util_mean=15.0)
    busy = _runs("busy", 0.3 + rng.normal(0, 0.01, 12), request=8.0).assign(pods=4, util_mean=90.0)
    single = _runs("one", 0.3 + rng.normal(0, 0.01, 12), request=1.0)
    half = _runs("half", 0.3 + rng.normal(0, 0.01, 12), request=8.0).assign(pods=4, util_mean=90.0, gpus_used_p95=4.0)
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


def _lagging(name: str, *, util: float, last_runtime_h: float, queue: str = "q") -> pd.DataFrame:
    """Ten runs of a four-worker, 8-GPU workload that keeps its GPUs busy; the last one took ``last_runtime_h``."""
    rng = np.random.default_rng(5)
    runs = _runs(name, 0.3 + rng.normal(0, 0.01, 10), request=8.0, queue=queue).assign(pods=4, util_mean=util)
    runs.loc[runs.index[-1], "runtime_h"] = last_runtime_h
    return runs


def test_growth_where_progress_lags_and_the_queue_has_idle_quota() -> None:
    """Usual runs take 2 h; the latest took 4 h with GPUs 90 % busy. With 6 GPUs of the queue's quota idle
    (2 per worker) it is advised 3 more workers (4 would restore the usual time at linear scaling, only 3
    fit); with 1 idle GPU, or the quota unknown, or GPUs not busy, or no lag, it keeps its 4 workers."""
    settings = RightsizeSettings(risk=0.1)
    lagging = _lagging("slow", util=90.0, last_runtime_h=4.0)
    grown = recommend(lagging, settings, {"q": 6.0}).iloc[0]
    assert grown["recommended_workers"] == 7
    assert "maxReplicas=7" in str(grown["reason"]) and "speed-up up to 75%" in str(grown["reason"])
    assert "took 2.00× its usual 2.00 h" in str(grown["reason"])
    capped = recommend(lagging, settings, {"q": 100.0}).iloc[0]
    assert capped["recommended_workers"] == 8  # max_growth 2×: the lag alone asks for 4 more
    no_room = recommend(lagging, settings, {"q": 1.0}).iloc[0]
    assert no_room["recommended_workers"] == 4 and "1 idle GPUs of quota" in str(no_room["reason"])
    unknown = recommend(lagging, settings).iloc[0]
    assert unknown["recommended_workers"] == 4 and "quota is unknown" in str(unknown["reason"])
    steady = recommend(_lagging("steady", util=90.0, last_runtime_h=2.2), settings, {"q": 6.0}).iloc[0]
    assert steady["recommended_workers"] == 4 and "workers:" not in str(steady["reason"])
    waiting = recommend(_lagging("waiting", util=45.0, last_runtime_h=4.0), settings, {"q": 6.0}).iloc[0]
    assert waiting["recommended_workers"] == 4 and "more" not in str(waiting["reason"])
    # two lagging workloads of one queue share its idle quota: the first takes the 6 GPUs, the second none
    both = recommend(
        pd.concat([lagging, _lagging("slow2", util=90.0, last_runtime_h=4.0)], ignore_index=True), settings, {"q": 6.0}
    ).set_index("workload")
    assert both.loc["slow", "recommended_workers"] == 7 and both.loc["slow2", "recommended_workers"] == 4
    assert "has 0 idle GPUs of quota" in str(both.loc["slow2", "reason"])


def test_idle_quota_is_the_least_idle_over_the_window() -> None:
    """deserved − allocated per queue, its minimum over the last hours (clipped at 0); a queue missing from
    either gauge is left out."""
    times = pd.date_range("2026-03-02", periods=13, freq="1h", tz="UTC")
    deserved = pd.DataFrame({"queue_name": "a", "timestamp": times, "value": 10.0})
    allocated = pd.DataFrame({"queue_name": "a", "timestamp": times, "value": np.r_[np.full(6, 9.0), np.full(7, 4.0)]})
    allocated.loc[12, "value"] = 7.0
    extra = pd.DataFrame({"queue_name": "b", "timestamp": times, "value": 12.0})
    idle = idle_quota(pd.concat([deserved, extra]), allocated, window_h=6)
    assert idle == {"a": 3.0}
    assert idle_quota(deserved, allocated, window_h=12) == {"a": 1.0}
    over = allocated.assign(value=15.0)
    assert idle_quota(deserved, over, window_h=6) == {"a": 0.0}


def test_idle_quota_leaves_out_nan_and_infinite_gauges() -> None:
    """Prometheus returns NaN and ±Inf samples as such (and a Parquet directory is not value-checked): such a
    step is no number of idle GPUs, so it is left out like a gap, and a queue with only such steps gets no
    growth advice instead of a crash in the advice's arithmetic."""
    times = pd.date_range("2026-03-02", periods=6, freq="1h", tz="UTC")
    deserved = pd.DataFrame({"queue_name": "q", "timestamp": times, "value": [10.0, np.nan, 10.0, np.inf, 10.0, 10.0]})
    allocated = pd.DataFrame({"queue_name": "q", "timestamp": times, "value": [4.0, 9.0, 4.0, 9.0, 4.0, np.nan]})
    assert idle_quota(deserved, allocated, window_h=12) == {"q": 6.0}
    assert idle_quota(deserved.assign(value=np.inf), allocated, window_h=12) == {}
    unknown = idle_quota(deserved.assign(value=np.nan), allocated, window_h=12)
    assert unknown == {}
    kept = recommend(_lagging("slow", util=90.0, last_runtime_h=4.0), RightsizeSettings(risk=0.1), unknown).iloc[0]
    assert kept["recommended_workers"] == 4


def test_volcano_queue_gauges_feed_growth_advice(demand_out: Path) -> None:
    """Volcano's per-queue gauges (milli-GPUs, one series per resource) are read next to DCGM and
    kube-state-metrics as GPUs per queue; without them right-sizing says growth advice is off."""
    frame = read_metrics(demand_out / "metrics", FAMILIES.split(","))
    queue = str(frame.loc[frame["__name__"] == "kube_pod_labels", "label_volcano_sh_queue_name"].dropna().iloc[0])
    times = pd.date_range(START, periods=12, freq="1h")
    gauges = pd.concat(
        [
            pd.DataFrame(
                {
                    "__name__": f"volcano_queue_{field}_scalar_resources",
                    "queue_name": queue,
                    "resource": resource,
                    "timestamp": times,
                    "value": value,
                }
            )
            for field, resource, value in (
                ("deserved", "nvidia.com/gpu", 8000.0),
                ("allocated", "nvidia.com/gpu", 5000.0),
                ("deserved", "cpu", 64000.0),
            )
        ]
    )
    with_quota = from_frame(pd.concat([frame, gauges], ignore_index=True), "test")
    assert with_quota.deserved.groupby("queue_name")["value"].max().to_dict() == {queue: 8.0}
    assert idle_quota(with_quota.deserved, with_quota.allocated, 6.0) == {queue: 3.0}
    assert not any("growth advice" in n for n in with_quota.notes)
    assert any("no growth advice" in n for n in from_frame(frame, "test").notes)


def test_nan_volcano_gauges_are_no_quota_not_zero(demand_out: Path) -> None:
    """A gauge whose samples are all NaN is no data (it once crashed with KeyError 'value', the all-NaN column
    being dropped), and a NaN step is unknown, not 0 GPUs of deserved quota (a NaN sum was 0: idle 0)."""
    frame = read_metrics(demand_out / "metrics", FAMILIES.split(","))
    times = pd.date_range(START, periods=4, freq="1h")

    def gauge(field: str, values: list[float]) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "__name__": f"volcano_queue_{field}_scalar_resources",
                "queue_name": "q",
                "resource": "nvidia.com/gpu",
                "timestamp": times,
                "value": values,
            }
        )

    nan = np.nan
    no_data = from_frame(pd.concat([frame, gauge("deserved", [nan] * 4), gauge("allocated", [1000.0] * 4)]), "t")
    assert no_data.deserved.empty and any("no growth advice" in n for n in no_data.notes)
    gappy = from_frame(
        pd.concat([frame, gauge("deserved", [8000.0, nan, 8000.0, 8000.0]), gauge("allocated", [1000.0] * 4)]), "t"
    )
    assert idle_quota(gappy.deserved, gappy.allocated, 12.0) == {"q": 7.0}


def test_negative_power_readings_are_no_energy(demand_out: Path) -> None:
    """DCGM power read from a Parquet directory is not value-checked: a negative reading is unknown, so no
    run (and no queue in the report's energy section) gets negative energy, while good readings count."""
    frame = read_metrics(demand_out / "metrics", FAMILIES.split(","))
    util = frame[frame["__name__"] == "DCGM_FI_DEV_GPU_UTIL"]
    power = util.assign(__name__="DCGM_FI_DEV_POWER_USAGE", value=np.where(np.arange(len(util)) % 2, -300.0, 300.0))
    _, runs = rightsize(from_frame(pd.concat([frame, power], ignore_index=True), "t"), RightsizeSettings())
    energy = runs["energy_kwh"].dropna()
    assert len(energy) > 0 and (energy > 0).all()
    assert (runs["power_mean_w"].dropna() == 300.0).all()
