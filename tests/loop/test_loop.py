"""The loop's cycle: plan mode on files, apply mode against the fake API server, holds, metrics, restarts.

The API server is ``tests.actuators.fake_apiserver`` over real HTTP (no kube-apiserver can be installed
here); the kill test runs the real CLI in a child process and SIGKILLs it while a patch is in flight.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml
from kubernetes import client

from predictor.actuators.audit import AuditLog
from predictor.actuators.volcano import VolcanoActuator
from predictor.config import load_settings
from predictor.errors import DataSourceError, RegistryError
from predictor.loop import KubeCluster, Loop, LoopMetrics, MetricsServer
from tests.actuators.fake_apiserver import FakeApiServer, Fault, queue_object, serve_team_queues
from tests.support.actuators import resizing

GPU = "nvidia.com/gpu"
NOW = pd.Timestamp("2026-11-02T10:20:00Z")
REPO = Path(__file__).resolve().parents[2]


class History:
    def __init__(self, levels: dict[str, float], *, error: Exception | None = None, newest: pd.Timestamp = NOW):
        self.levels, self.error, self.newest = levels, error, newest

    def history(self, now: pd.Timestamp) -> pd.DataFrame:
        if self.error:
            raise self.error
        times = pd.date_range(end=self.newest.floor("h"), periods=48, freq="h")
        return pd.DataFrame(
            [{"series_id": q, "timestamp": t, "value": v} for q, v in self.levels.items() for t in times]
        )


class Flat:
    """A forecaster that repeats the last value with fixed bands (the contract, nothing more)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def forecast(self, history: pd.DataFrame, *, horizon: int) -> tuple[pd.DataFrame, dict[str, str]]:
        if self.error:
            raise self.error
        last = history.sort_values("timestamp").groupby("series_id").tail(1)
        rows = [
            {
                "series_id": r.series_id,
                "timestamp": r.timestamp + pd.Timedelta(hours=h),
                "mean": r.value,
                "lo-80": r.value - 2,
                "hi-80": r.value + 2,
                "lo-95": r.value - 4,
                "hi-95": r.value + 4,
            }
            for r in last.itertuples()
            for h in range(1, horizon + 1)
        ]
        return pd.DataFrame(rows), {"gpu-forecast": "7"}


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with serve_team_queues() as server:
        yield server


def make_loop(
    fake: FakeApiServer,
    tmp_path: Path,
    api: client.ApiClient,
    *,
    mode: str = "apply",
    history: History | None = None,
    forecaster: Flat | None = None,
    at: pd.Timestamp = NOW,
) -> Loop:
    settings = load_settings(
        None, actuators={**resizing(mode), "audit_log": tmp_path / "audit.jsonl", "plan_dir": tmp_path / "plans"}
    )
    actuator = VolcanoActuator(api, timeout_s=2)
    return Loop(
        settings,
        cluster=KubeCluster(actuator),
        history=history or History({"team-a": 22, "team-b": 41}),
        forecaster=forecaster or Flat(),
        actuator=actuator,
        clock=lambda: at,
    )


@pytest.fixture
def api(fake: FakeApiServer) -> Iterator[client.ApiClient]:
    with client.ApiClient(client.Configuration(host=fake.url)) as api_client:
        yield api_client


def test_apply_cycle_patches_audits_and_is_not_repeated(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    loop = make_loop(fake, tmp_path, api)
    report = loop.run_once()
    assert report.hold is None and [o.outcome for o in report.outcomes] == ["applied", "applied"]
    assert fake.queues["team-a"]["spec"]["deserved"][GPU] == "24"
    outcomes = [r["outcome"] for r in AuditLog(tmp_path / "audit.jsonl").read()]
    assert outcomes.count("intent") == outcomes.count("applied") > 0 and outcomes[-1] == "cycle-done"
    assert loop.run_once().skipped  # same interval slot: nothing runs twice
    later = make_loop(fake, tmp_path, api, at=NOW + pd.Timedelta(minutes=30))
    assert later.run_once(force=True).plan.changes == ()  # converged, and in cooldown anyway


def test_plan_mode_writes_files_and_touches_nothing(fake: FakeApiServer, api: client.ApiClient, tmp_path: Path) -> None:
    report = make_loop(fake, tmp_path, api, mode="plan").run_once()
    assert report.plan is not None and report.plan.changes and fake.patches() == []
    assert json.loads((tmp_path / "plans" / "plan.json").read_text())["changes"]
    assert yaml.safe_load((tmp_path / "plans" / "queues" / "team-a.yaml").read_text())["spec"]["deserved"][GPU] == "24"


@pytest.mark.parametrize(
    ("history", "forecaster", "code"),
    [
        (History({}, error=DataSourceError("prometheus: connection refused")), Flat(), "source_down"),
        (History({"team-a": 22}, newest=NOW - pd.Timedelta(hours=6)), Flat(), "stale_data"),
        (History({"team-a": 22}), Flat(RegistryError("no champion for gpu-forecast")), "missing_model"),
    ],
)
def test_a_broken_input_holds_everything_and_says_why(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path, history: History, forecaster: Flat, code: str
) -> None:
    report = make_loop(fake, tmp_path, api, history=history, forecaster=forecaster).run_once()
    assert report.hold is not None and report.hold[0] == code
    assert fake.patches() == [] and report.plan is not None and report.plan.changes == ()
    assert {h.code for h in report.plan.held if h.queue == "team-a"} == {code}


def test_metrics_and_readiness_are_served(fake: FakeApiServer, api: client.ApiClient, tmp_path: Path) -> None:
    metrics = LoopMetrics()
    loop = make_loop(fake, tmp_path, api)
    loop.metrics = metrics
    with MetricsServer(metrics, 0, "127.0.0.1") as server:
        base = f"http://127.0.0.1:{server.port}"
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(base + "/ready", timeout=5)
        loop.run_once()
        with urllib.request.urlopen(base + "/ready", timeout=5) as ready:
            assert ready.status == 200
        with urllib.request.urlopen(base + "/metrics", timeout=5) as page:
            text = page.read().decode()
    assert 'predictor_loop_cycles_total{result="ok"} 1.0' in text
    assert 'predictor_loop_changes_total{mode="apply",outcome="applied"}' in text
    assert 'predictor_loop_model_info{family="gpu-forecast",version="7"} 1.0' in text
    assert 'predictor_loop_forecast_gpus{band="hi-80",queue="team-a"} 24.0' in text
    # the dynamic-threshold gauges the example alert rules compare live demand against
    assert 'predictor_forecast_upper{level="80",series="team-a"} 24.0' in text
    assert 'predictor_forecast_lower{level="80",series="team-a"}' in text
    assert "predictor_loop_last_success_timestamp_seconds" in text


@pytest.mark.slow
def test_killed_mid_apply_restarts_without_half_patches_or_repeats(fake: FakeApiServer, tmp_path: Path) -> None:
    for name in ("team-c", "team-d"):
        fake.add(queue_object(name, deserved=8, capability=16))
    now = pd.Timestamp.now(tz="UTC")
    rows = [
        {"series_id": q, "timestamp": t.isoformat(), "value": v}
        for q, v in (("team-a", 22.0), ("team-b", 41.0), ("team-c", 12.0), ("team-d", 12.0))
        for t in pd.date_range(end=now.floor("h"), periods=72, freq="h")
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "history.csv", index=False)
    (tmp_path / "kubeconfig").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "fake",
                "clusters": [{"name": "fake", "cluster": {"server": fake.url}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
            }
        )
    )
    (tmp_path / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "actuators": {
                    **resizing("apply"),
                    "audit_log": str(tmp_path / "audit.jsonl"),
                    "plan_dir": str(tmp_path / "plans"),
                }
            }
        )
    )
    cmd = [
        sys.executable,
        "-m",
        "predictor.cli",
        "loop",
        "--once",
        "--config",
        str(tmp_path / "config.yaml"),
        "--history",
        str(tmp_path / "history.csv"),
        "--model",
        "naive",
        "--kubeconfig",
        str(tmp_path / "kubeconfig"),
    ]
    # One pod (its name is the Lease holder): the restarted container takes its own Lease back at once.
    env = {**os.environ, "PYTHONPATH": str(REPO), "POD_NAME": "predictor-loop-0"}
    fake.faults.append(Fault(delay_s=4.0, after=1))  # the second patch hangs in flight
    child = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while len(fake.patches()) < 2 and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    assert len(fake.patches()) == 2, child.communicate()[0].decode()[-2000:]
    child.send_signal(signal.SIGKILL)
    child.communicate()
    time.sleep(4.5)  # the in-flight patch lands after its client died
    assert fake.writes == 2
    rerun = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, timeout=180)
    assert rerun.returncode == 0, rerun.stdout.decode()[-2000:] + rerun.stderr.decode()[-2000:]
    records = AuditLog(tmp_path / "audit.jsonl").read()
    applied = [(r["queue"], r["field"]) for r in records if r["outcome"] == "applied"]
    assert len(applied) == len(set(applied))  # no decision recorded (or made) twice
    assert {q for q, _ in applied} == {"team-a", "team-b", "team-c", "team-d"}
    assert fake.writes == 4  # one effective patch per queue, none repeated
    assert any(r["outcome"] == "applied" and "after a restart" in r["reason"] for r in records)
    for name in ("team-a", "team-b", "team-c", "team-d"):
        spec = fake.queues[name]["spec"]
        g, d, c = (
            float(x) for x in (spec["guarantee"]["resource"][GPU], spec["deserved"][GPU], spec["capability"][GPU])
        )
        assert g <= d <= c


def test_run_forever_survives_a_failing_cycle_and_stops_when_asked(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    loop = make_loop(fake, tmp_path, api, forecaster=Flat(ValueError("boom")))
    ticks: list[float] = []
    loop.run_forever(lambda: len(ticks) >= 2, sleep=ticks.append)
    failed = [r for r in AuditLog(tmp_path / "audit.jsonl").read() if r["outcome"] == "failed"]
    assert len(ticks) == 2 and failed and "ValueError: boom" in failed[0]["reason"]
