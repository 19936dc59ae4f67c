"""Root-cause diagnosis in the loop: when it triggers, a fault holds its queue, a failure never breaks the
cycle, and the served gpu-rca champion is kept when a newer one fails to load.

The fault cycle reads the simulated ``gpu_oom`` on node-005 (``tests.diagnose.conftest.SMALL``) through a
history-file source and diagnoses it with the bundled model, so the hold is the real model's answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from models.frames import ID, TIME, VALUE
from pipelines.rca_data import simulate_scenario, to_long_frame
from predictor.actuators.audit import AuditLog
from predictor.config import DiagnoseLoopSettings, load_settings
from predictor.diagnose.models import load_default
from predictor.errors import DataSourceError, RegistryError
from predictor.loop import FileCluster, Loop, LoopMetrics
from predictor.loop.rca import LoopRca, RegistryRca, summary
from predictor.loop.rca_triggers import demand_triggers, restart_triggers, util_triggers
from predictor.registry import RCA_FAMILY, ModelVersionInfo
from predictor.registry.served import ServedModel
from predictor.sources.files import FileSource, write_frame
from tests.actuators.fake_apiserver import queue_object
from tests.diagnose.conftest import SMALL
from tests.loop.test_loop import Flat, History

FAULT_AT = pd.Timestamp("2026-03-09T05:16:00Z")  # gpu_oom on node-005 (job s364) since 05:06, crash-looping
WINDOW = pd.Timedelta(minutes=15)


def _long(rows: list[tuple[dict[str, str], list[pd.Timestamp], list[float]]]) -> pd.DataFrame:
    """A long frame as a source returns it, from (labels with __name__, times, values) per series."""
    parts = []
    for labels, times, values in rows:
        sid = (
            labels["__name__"]
            + "{"
            + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
            + "}"
        )
        parts.append(pd.DataFrame({ID: sid, TIME: times, VALUE: values, **labels}))
    return pd.concat(parts, ignore_index=True)


def _minutes(now: pd.Timestamp, n: int = 30) -> list[pd.Timestamp]:
    return list(pd.date_range(end=now, periods=n, freq="min"))


# -- triggers ------------------------------------------------------------------------------------------


def test_demand_triggers_only_for_queues_outside_the_forecast_band() -> None:
    now = pd.Timestamp("2026-11-02T10:00:00Z")
    history = History({"team-a": 22, "team-b": 41}, newest=now).history(now)
    forecast, _ = Flat().forecast(History({"team-a": 22, "team-b": 30}, newest=now).history(now), horizon=3)
    fired = demand_triggers(history, forecast, now)
    assert [(t.kind, t.subject, t.queue) for t in fired] == [("demand_band", "team-b", "team-b")]
    assert "41" in fired[0].reason and "[28, 32]" in fired[0].reason
    assert demand_triggers(history, None, now) == [] and demand_triggers(None, forecast, now) == []


def test_util_trigger_fires_for_a_stalled_job_not_a_steady_or_a_swinging_one() -> None:
    now = pd.Timestamp("2026-11-02T10:00:00Z")
    times = _minutes(now)
    stalled = [90.0] * 15 + [10.0] * 15  # busy before the window, idle in it
    swinging = [20.0, 90.0] * 15  # always swings: its own band is wide
    rows = [
        ({"__name__": "DCGM_FI_DEV_GPU_UTIL", "namespace": "ml", "pod": "stall-worker-0", "gpu": "0"}, times, stalled),
        ({"__name__": "DCGM_FI_DEV_GPU_UTIL", "namespace": "ml", "pod": "steady-0", "gpu": "1"}, times, [90.0] * 30),
        ({"__name__": "DCGM_FI_DEV_GPU_UTIL", "namespace": "ml", "pod": "swing-0", "gpu": "2"}, times, swinging),
        (
            {
                "__name__": "kube_pod_labels",
                "namespace": "ml",
                "pod": "stall-worker-0",
                "label_volcano_sh_job_name": "stall",
                "label_volcano_sh_queue_name": "team-a",
            },
            times,
            [1.0] * 30,
        ),
    ]
    fired = util_triggers(_long(rows), now, WINDOW)
    assert [(t.kind, t.subject, t.queue) for t in fired] == [("gpu_util_band", "stall", "team-a")]
    # A job seen only in the window has no band of its own yet.
    assert util_triggers(_long([(rows[0][0], times[15:], stalled[15:])]), now, WINDOW) == []


def test_restart_trigger_counts_restarts_in_the_window_resets_and_volcano_retries() -> None:
    now = pd.Timestamp("2026-11-02T10:00:00Z")
    times = _minutes(now)
    restarts = "kube_pod_container_status_restarts_total"
    rows = [
        ({"__name__": restarts, "namespace": "ml", "pod": "old-0", "container": "c"}, times, [0.0] * 5 + [1.0] * 25),
        ({"__name__": restarts, "namespace": "ml", "pod": "now-0", "container": "c"}, times, [2.0] * 20 + [3.0] * 10),
        ({"__name__": restarts, "namespace": "ml", "pod": "reset-0", "container": "c"}, times, [5.0] * 20 + [1.0] * 10),
        ({"__name__": "volcano_job_retry_counts", "job_id": "ml/retried"}, times, [0.0] * 25 + [1.0] * 5),
    ]
    fired = restart_triggers(_long(rows), now, WINDOW)
    assert [(t.kind, t.subject) for t in fired] == [
        ("job_restart", "now"),
        ("job_restart", "reset"),
        ("job_restart", "retried"),
    ]
    assert "restarted 1 time(s)" in fired[0].reason


# -- the cycle -----------------------------------------------------------------------------------------


class Served:
    """A root-cause model provider: the bundled model under a registry URI, or an error."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error, self.tree = error, load_default()

    def model(self) -> tuple[Any, str]:
        if self.error:
            raise self.error
        return self.tree, "models:/gpu-rca/3"


class Down:
    def query_range(self, query: str, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta) -> pd.DataFrame:
        raise DataSourceError("prometheus: connection refused")


@pytest.fixture(scope="module")
def fault_window(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[str]]:
    """The simulated history around the fault as a file, the faulted job's queue, and every queue."""
    frame = to_long_frame(simulate_scenario(SMALL))
    stamps = pd.to_datetime(frame[TIME], utc=True)
    frame = frame[(stamps > FAULT_AT - pd.Timedelta(hours=1)) & (stamps <= FAULT_AT)]
    path = tmp_path_factory.mktemp("rca-window") / "window.parquet"
    write_frame(frame, path)
    labels = frame[frame["__name__"] == "kube_pod_labels"]
    queue = labels.loc[labels["label_volcano_sh_job_name"] == "job-s364", "label_volcano_sh_queue_name"].iloc[0]
    return path, str(queue), sorted(labels["label_volcano_sh_queue_name"].dropna().unique())


def _loop(tmp_path: Path, queues: list[str], source: Any, served: Served) -> Loop:
    settings = load_settings(
        None,
        actuators={
            "audit_log": tmp_path / "audit.jsonl",
            "plan_dir": tmp_path / "plans",
            "queues": {"manage": {"all": True}},
        },
        loop={"diagnose": {"enabled": True}},
    )
    loop = Loop(
        settings,
        cluster=FileCluster({"items": [queue_object(q, deserved=8, capability=64) for q in queues]}),
        history=History(dict.fromkeys(queues, 20.0), newest=FAULT_AT),
        forecaster=Flat(),
        clock=lambda: FAULT_AT,
    )
    loop.rca = LoopRca(settings.loop.diagnose, source, served, loop.metrics)
    return loop


def _sample(metrics: LoopMetrics, name: str, **labels: str) -> float | None:
    value = metrics.registry.get_sample_value(name, labels)
    return None if value is None else float(value)


@pytest.mark.slow  # simulates the fault's history and reads every family the model needs
def test_a_fault_holds_its_queue_and_is_audited_and_exported(
    tmp_path: Path, fault_window: tuple[Path, str, list[str]]
) -> None:
    path, faulted, queues = fault_window
    loop = _loop(tmp_path, queues, FileSource(path), Served())
    report = loop.run_once()
    assert report.plan is not None and report.hold is None
    holds = {h.queue: h for h in report.plan.held if h.code == "rca_fault"}
    assert faulted in holds and "gpu_oom" in holds[faulted].reason and "node-005" in holds[faulted].reason
    assert not any(c.queue == faulted for c in report.plan.changes)  # the faulted queue is not grown
    assert any(c.queue != faulted for c in report.plan.changes)  # the others are planned as usual
    records = AuditLog(tmp_path / "audit.jsonl").read()
    oom = [r for r in records if r["outcome"] == "finding" and r["code"] == "gpu_oom"]
    assert oom and oom[0]["queue"] == faulted and oom[0]["models"] == {RCA_FAMILY: "models:/gpu-rca/3"}
    assert oom[0]["finding"]["node"] == "node-005" and oom[0]["finding"]["job"] == "job-s364"
    assert any(r["outcome"] == "cycle-done" for r in records)
    m = loop.metrics
    probability = _sample(m, "predictor_rca_finding", cause="gpu_oom", node="node-005", queue=faulted)
    assert probability is not None and probability >= 0.5
    assert (_sample(m, "predictor_loop_rca_triggers_total", trigger="job_restart") or 0) >= 1
    assert _sample(m, "predictor_loop_rca_diagnoses_total", result="ok") == 1


class Restarting:
    """A source whose only news is a job restart in the window (the trigger fires; nothing else to read)."""

    def query_range(self, query: str, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta) -> pd.DataFrame:
        labels = {"__name__": query, "namespace": "ml", "pod": "crashing-0", "container": "c"}
        if query != "kube_pod_container_status_restarts_total":
            return pd.DataFrame(columns=[ID, TIME, VALUE])
        return _long([(labels, _minutes(end), [0.0] * 25 + [1.0] * 5)])


@pytest.mark.parametrize("broken", ["source", "model"])
def test_a_failed_diagnosis_is_counted_and_audited_and_the_cycle_goes_on(tmp_path: Path, broken: str) -> None:
    source = Down() if broken == "source" else Restarting()
    served = Served(RegistryError("no champion for gpu-rca in the model registry") if broken == "model" else None)
    loop = _loop(tmp_path, ["team-a", "team-b"], source, served)
    report = loop.run_once()
    assert report.plan is not None and report.plan.changes and report.hold is None
    assert not any(h.code == "rca_fault" for h in report.plan.held)
    records = AuditLog(tmp_path / "audit.jsonl").read()
    failed = [r for r in records if r["outcome"] == "finding"]
    assert [r["code"] for r in failed] == ["rca_failed"]
    assert ("connection refused" if broken == "source" else "no champion") in failed[0]["reason"]
    assert records[-1]["outcome"] == "cycle-done"
    assert _sample(loop.metrics, "predictor_loop_rca_diagnoses_total", result="failed") == 1
    assert loop.rca is not None and loop.rca.last is not None
    assert summary(loop.rca.last).startswith("root-cause diagnosis failed: ")


# -- the served champion -------------------------------------------------------------------------------


class Registry:
    """A ChampionRegistry whose champion moves; each version loads as given (an estimator or an error)."""

    def __init__(self, versions: dict[str, Any]) -> None:
        self.versions, self.champion = versions, "1"

    def get(self, family: str) -> ModelVersionInfo:
        return ModelVersionInfo(family=family, version=self.champion, run_id=f"run-{self.champion}")

    def load(self, family: str) -> ServedModel:
        held = self.versions[self.champion]
        if isinstance(held, Exception):
            raise held
        return ServedModel(held, "tabular", version=self.champion)


def test_the_last_good_champion_is_kept_when_a_newer_one_does_not_load() -> None:
    tree = load_default()
    registry = Registry({"1": tree, "2": RegistryError("digest mismatch"), "3": np.zeros(3), "4": tree})
    metrics = LoopMetrics()
    served = RegistryRca(registry, metrics)
    assert served.model() == (tree, "models:/gpu-rca/1")
    for broken in ("2", "3"):  # a failed load, then a version that holds no root-cause model
        registry.champion = broken
        model, uri = served.model()
        assert model is tree and uri == "models:/gpu-rca/1"
        assert _sample(metrics, "predictor_loop_served_model_stale", family=RCA_FAMILY) == 1
    assert _sample(metrics, "predictor_loop_model_load_failures_total", family=RCA_FAMILY) == 2
    registry.champion = "4"
    assert served.model()[1] == "models:/gpu-rca/4"
    assert _sample(metrics, "predictor_loop_served_model_stale", family=RCA_FAMILY) == 0
    assert _sample(metrics, "predictor_loop_served_model_info", family=RCA_FAMILY, uri="models:/gpu-rca/4") == 1


def test_settings_refuse_a_window_of_too_few_steps() -> None:
    with pytest.raises(ValueError, match="at most a third of window_s"):
        DiagnoseLoopSettings(window_s=120, step_s=60)
    assert json.loads(DiagnoseLoopSettings().model_dump_json())["enabled"] is False
