"""Five weeks of a 64-node (512-GPU) cluster replaying Philly, backfilled into a real
Prometheus with promtool and read back through ``PrometheusSource``.

An hourly step and a subset of families keep this to about a minute on two cores; the 1-minute
full-size run is ``bench/sim.py``'s job.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from predictor import sim
from predictor.config import PrometheusSettings
from predictor.sources.prometheus import PrometheusSource
from predictor.sources.promql import Selector

# The public Microsoft Philly trace (msr-fiddle/philly-traces, CC BY 4.0) as a job table, kept in the data
# directory beside the repository; the test skips where it is absent.
PHILLY = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "philly" / "jobs.csv"
STEP = pd.Timedelta(hours=1)
FAMILIES = ",".join(
    [
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "volcano_queue_allocated_scalar_resources",
        "volcano_queue_capacity_scalar_resources",
        "kube_node_status_condition",
        "kube_pod_container_resource_requests",
        "kube_pod_container_status_last_terminated_reason",
        "node_netstat_Tcp_RetransSegs",
        "node_cpu_seconds_total",
        "node_load1",
        "node_ethtool_rx_prio3_pause",
        "node_ethtool_np_cnp_sent",
        "node_network_carrier_changes_total",
    ]
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not PHILLY.is_file(), reason=f"Philly table not found at {PHILLY}"),
]


@pytest.fixture(scope="module")
def philly_run(tmp_path_factory):
    settings = sim.SimSettings(
        start=pd.Timestamp("2017-10-02", tz="UTC"),
        weeks=5,
        step_s=int(STEP.total_seconds()),
        seed=11,
        fault_rate_per_day=3,
        metrics=FAMILIES,
    )
    result = sim.simulate(sim.load_jobs(PHILLY), sim.ClusterSpec.uniform(64), settings)
    out = tmp_path_factory.mktemp("philly-5w")
    result.write(out, openmetrics=True, parquet=False)
    return result, out / "metrics.om"


@pytest.fixture(scope="module")
def source(philly_run, prometheus_from_openmetrics):
    server = prometheus_from_openmetrics(philly_run[1])
    philly_run[1].unlink()  # ~0.6 GB of text, no longer needed once backfilled
    return PrometheusSource(PrometheusSettings(url=server.url))


def _window(result):
    return result.grid.index()[0], result.grid.index()[-1]


def test_allocation_never_exceeds_capacity(philly_run, source):
    result, _ = philly_run
    start, end = _window(result)
    volcano = source.query_range(
        'sum(volcano_queue_allocated_scalar_resources{resource="nvidia.com/gpu"}) / 1000', start, end, STEP
    )
    assert len(volcano) == result.grid.n_steps
    assert volcano["value"].max() <= 512 and volcano["value"].mean() > 300  # a busy Philly cluster
    per_node = source.query_range(
        'max(sum by (node) (kube_pod_container_resource_requests{resource="nvidia_com_gpu",node!=""}))',
        start,
        end,
        STEP,
    )
    assert per_node["value"].max() <= 8


def test_utilisation_stays_in_range(philly_run, source):
    result, _ = philly_run
    start, end = _window(result)
    lo = source.query_range("min(DCGM_FI_DEV_GPU_UTIL)", start, end, STEP)["value"]
    hi = source.query_range("max(DCGM_FI_DEV_GPU_UTIL)", start, end, STEP)["value"]
    assert lo.min() >= 0 and hi.max() <= 100 and hi.max() > 50


def test_gang_jobs_start_whole(philly_run, source):
    result, _ = philly_run
    start, end = _window(result)
    jobs = result.jobs_out
    gangs = jobs[(jobs["num_gpus"] > 8) & (jobs["start"] >= start) & (jobs["end"] - jobs["start"] > 2 * STEP)]
    assert len(gangs) >= 5
    requests = source.query_range(
        Selector.of("kube_pod_container_resource_requests", resource="nvidia_com_gpu").where("node", ".+", "=~"),
        start,
        end,
        STEP,
    )
    for job in gangs.itertuples():
        pods = requests[requests["pod"].str.startswith(f"job-{job.job_id}-worker-")]
        pods = pods[(pods["timestamp"] >= job.start) & (pods["timestamp"] < job.end)]
        first = pods.groupby("pod")["timestamp"].min()
        gpus = pods.groupby("pod")["value"].first().sum()
        assert first.nunique() == 1, f"gang {job.job_id} pods started at different times"
        assert gpus == job.num_gpus, f"gang {job.job_id}: {gpus} of {job.num_gpus} GPUs placed"


def test_injected_faults_are_visible(philly_run, source, signatures):
    result, _ = philly_run
    grid = result.grid

    def get(metric, labels, t0, t1):
        # Align to the sample grid: between samples an hourly series has nothing within the lookback.
        k0 = int(np.ceil((t0.timestamp() - grid.start_s) / grid.step_s))
        k1 = int(np.floor((t1.timestamp() - grid.start_s) / grid.step_s))
        if k1 < k0:
            return pd.DataFrame(columns=["timestamp", "value", *labels])
        index = grid.index()
        return source.query_range(
            Selector.of(metric, labels), index[max(k0, 0)], index[min(k1, grid.n_steps - 1)], STEP
        )

    faults = result.faults
    assert len(faults) >= 50 and len(set(faults["cause"])) == len(sim.CAUSES)
    failures = []
    checked = 0
    for _, fault in faults.iterrows():
        if signatures.overlaps_node_outage(fault, faults) or fault["end"] - fault["start"] < 3 * STEP:
            continue
        ok, measured = signatures.check_fault(fault, get, STEP)
        checked += 1
        if not ok:
            failures.append(f"{fault['cause']} #{fault['fault_id']}: {measured}")
    assert checked >= 30
    assert not failures, "\n".join(failures)
