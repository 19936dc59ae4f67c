"""Root-cause diagnosis at runtime, end to end: a simulated ``gpu_oom`` fault on node-005 in a REAL Prometheus
(promtool backfill), the bundled root-cause model registered as ``gpu-rca`` champion in a real sqlite MLflow
registry, and ``predictor loop --once`` (the CLI) → an audit record and a ``/metrics`` series naming the
cause and the node, both citing the registered version the loop served.

The simulated history is shifted so that the fault's window ends now (the loop diagnoses at its own clock);
nothing after the diagnosed instant is written, as on a live cluster.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from models.frames import ID, TIME, VALUE
from pipelines.rca_data import simulate_scenario, to_long_frame
from predictor.actuators.audit import AuditLog
from predictor.cli import main
from predictor.config import MlflowSettings
from predictor.diagnose.models import load_default
from predictor.registry import CHAMPION, RCA_FAMILY, ModelRegistry
from tests.actuators.fake_apiserver import queue_object
from tests.diagnose.conftest import SMALL

pytestmark = pytest.mark.slow

# From the faults table of SMALL (deterministic for its seed): gpu_oom on node-005 GPU 2 (job s364) from
# 05:06 to 05:35; its container crash-loops, so the restart trigger fires.
FAULT_AT = pd.Timestamp("2026-03-09T05:16:00Z")
HISTORY = pd.Timedelta(hours=2)  # what is backfilled before the fault's instant: the window and its baseline


def _openmetrics(frame: pd.DataFrame, path: Path) -> None:
    """The long frame as OpenMetrics promtool backfills: families contiguous, each series in time order."""
    frame = frame.sort_values(["__name__", ID, TIME])
    seconds = pd.to_datetime(frame[TIME], utc=True).astype("int64") // 1_000_000_000
    lines = [f"{sid} {value:.6g} {ts}\n" for sid, value, ts in zip(frame[ID], frame[VALUE], seconds, strict=True)]
    path.write_text("".join(lines) + "# EOF\n", encoding="utf-8")


def test_loop_once_records_the_injected_fault_from_the_registered_champion(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    prometheus_from_openmetrics: Any,
) -> None:
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is ./mlruns
    run = simulate_scenario(SMALL)
    fault = run.faults[(run.faults["cause"] == "gpu_oom") & (run.faults["node"] == "node-005")].iloc[0]
    assert fault["start"] < FAULT_AT < fault["end"]

    # 1. The history up to the fault's instant, moved so that instant is now, in a real Prometheus.
    now = pd.Timestamp.now(tz="UTC").floor("min")
    frame = to_long_frame(run)
    stamps = pd.to_datetime(frame[TIME], utc=True)
    frame = frame[(stamps > FAULT_AT - HISTORY) & (stamps <= FAULT_AT)]
    frame = frame.assign(**{TIME: pd.to_datetime(frame[TIME], utc=True) + (now - FAULT_AT)})
    _openmetrics(frame, tmp_path / "history.om")
    prom = prometheus_from_openmetrics(tmp_path / "history.om")

    # 2. The bundled root-cause model as the gpu-rca champion of a real sqlite registry.
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    registry = ModelRegistry(MlflowSettings(tracking_uri=tracking))
    version = registry.log_model(RCA_FAMILY, load_default(), kind="tabular").version
    registry.promote(RCA_FAMILY, version)
    assert registry.get(RCA_FAMILY, CHAMPION) is not None
    uri = f"models:/{RCA_FAMILY}/{version}"

    # 3. One loop cycle from the CLI, plan mode, the sim's queues from a file.
    queue_names = sorted({q for q in frame.get("label_volcano_sh_queue_name", pd.Series(dtype=str)).dropna() if q})
    assert queue_names
    (tmp_path / "queues.json").write_text(
        json.dumps({"items": [queue_object(q, deserved=8, capability=48) for q in queue_names]})
    )
    config = tmp_path / "settings.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "prometheus": {"url": prom.url},
                "mlflow": {"tracking_uri": tracking},
                "actuators": {"audit_log": str(tmp_path / "audit.jsonl"), "plan_dir": str(tmp_path / "plans")},
                "loop": {"diagnose": {"enabled": True, "window_s": 900, "step_s": 60}},
            }
        )
    )
    metrics_file = tmp_path / "metrics.prom"
    rc = main(
        [
            "loop",
            "--once",
            "--config",
            str(config),
            "--queues",
            str(tmp_path / "queues.json"),
            "--model",
            "seasonal_naive_24",
            "--metrics-file",
            str(metrics_file),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "root causes after" in out and "gpu_oom" in out and "node-005" in out

    # 4. The finding in the audit log: cause, node, job, probability and the served model's URI.
    records = AuditLog(tmp_path / "audit.jsonl").read()
    findings = [r for r in records if r["outcome"] == "finding"]
    oom = [r for r in findings if r["code"] == "gpu_oom"]
    assert oom, [(r["code"], r["reason"][:120]) for r in findings]
    found = oom[0]["finding"]
    assert found["node"] == "node-005" and found["probability"] >= 0.5
    assert found["job"] and str(fault["job_id"]) in found["job"]
    assert oom[0]["models"] == {RCA_FAMILY: uri}
    assert "restarted" in oom[0]["reason"]  # the crash loop is what triggered the diagnosis

    # 5. ... and on /metrics: the finding's series, the trigger and the diagnosis counted, the model served.
    text = metrics_file.read_text()
    series = [line for line in text.splitlines() if line.startswith("predictor_rca_finding{")]
    assert any('cause="gpu_oom"' in s and 'node="node-005"' in s for s in series), series
    assert 'predictor_loop_rca_triggers_total{trigger="job_restart"}' in text
    assert 'predictor_loop_rca_diagnoses_total{result="ok"} 1.0' in text
    assert f'predictor_loop_served_model_info{{family="{RCA_FAMILY}",uri="{uri}"}} 1.0' in text
