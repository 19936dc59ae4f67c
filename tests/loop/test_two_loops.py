"""Two loops at once (issue 19, finding 2): one acts, the other stands by; a Lease expiry hands over.

Real locks and a real HTTP API: ``fcntl.flock`` on the audit log's lock file, and the ``kubernetes``
client's CoordinationV1Api against the fake API server's Lease endpoints. Time is the loops' injected clock.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from kubernetes import client

from predictor.actuators.audit import AuditLog
from predictor.actuators.volcano import VolcanoActuator
from predictor.cli import main
from predictor.config import load_settings
from predictor.loop import FileLock, KubeCluster, LeaseLock, Loop
from tests.actuators.fake_apiserver import FakeApiServer, Fault, queue_object, serve
from tests.loop.test_hardening import FRESH, Flat, History
from tests.support.actuators import resizing

NOW = pd.Timestamp("2026-11-02T10:20:00Z")
LEASE_S = 60.0


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with serve() as server:
        server.add(queue_object("team-a", deserved=16, capability=32, guarantee=4, allocated=10))
        server.add(queue_object("team-b", deserved=40, capability=48, guarantee=8, allocated=12))
        yield server


@pytest.fixture
def api(fake: FakeApiServer) -> Iterator[client.ApiClient]:
    with client.ApiClient(client.Configuration(host=fake.url)) as api_client:
        yield api_client


def make_loop(api: client.ApiClient, audit: Path, who: str, clock: list[pd.Timestamp]) -> Loop:
    settings = load_settings(
        None, actuators={**resizing("apply"), "audit_log": audit, "plan_dir": audit.parent / "plans"}
    )
    actuator = VolcanoActuator(api, timeout_s=2)
    lease = LeaseLock(api, name="loop", namespace="gpu-capacity-predictor", duration_s=LEASE_S, identity=who)
    history = History({"team-a": (22.0, FRESH), "team-b": (41.0, FRESH)})
    return Loop(
        settings,
        cluster=KubeCluster(actuator),
        history=history,
        forecaster=Flat(),
        actuator=actuator,
        clock=lambda: clock[0],
        lease=lease,
    )


def outcomes(audit: Path) -> list[str]:
    return [str(r["outcome"]) for r in AuditLog(audit).read()]


def test_two_loops_on_one_audit_log_one_acts_the_other_holds(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    clock = [NOW]
    audit = tmp_path / "audit.jsonl"
    first, second = make_loop(api, audit, "pod-a", clock), make_loop(api, audit, "pod-b", clock)
    won = first.run_once()
    held = second.run_once(force=True)  # force: not even a forced run passes the lock
    assert won.standby == "" and [o.outcome for o in won.outcomes] == ["applied", "applied"]
    assert "holds" in held.standby and held.plan is None and held.outcomes == []
    assert outcomes(audit).count("cycle-done") == 1
    assert fake.writes == 2  # each queue patched once, not twice
    first.close()
    assert fake.leases[("gpu-capacity-predictor", "loop")]["spec"].get("holderIdentity") is None  # given up


def test_two_pods_share_one_lease_and_an_expired_lease_is_taken_over(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    clock = [NOW]
    a = make_loop(api, tmp_path / "a" / "audit.jsonl", "pod-a", clock)
    b = make_loop(api, tmp_path / "b" / "audit.jsonl", "pod-b", clock)
    assert a.run_once().standby == ""
    writes = fake.writes
    clock[0] = NOW + pd.Timedelta(seconds=LEASE_S - 1)
    standby = b.run_once()
    assert "pod-a" in standby.standby and fake.writes == writes  # cooldowns live in a's log: b must not act
    assert outcomes(tmp_path / "b" / "audit.jsonl") == []
    probe = FileLock(tmp_path / "b" / "audit.jsonl.lock", identity="probe")
    assert probe.acquire(NOW) == ""  # standing by, b does not keep its audit log locked either
    probe.release()
    clock[0] = NOW + pd.Timedelta(seconds=LEASE_S + 1)  # a stopped renewing (died without releasing)
    took = b.run_once()
    assert took.standby == "" and took.plan is not None
    assert fake.leases[("gpu-capacity-predictor", "loop")]["spec"]["holderIdentity"] == "pod-b"
    assert "pod-b" in a.run_once().standby  # the old holder, back, now stands by


def test_a_renewing_holder_keeps_the_lease(fake: FakeApiServer, api: client.ApiClient, tmp_path: Path) -> None:
    clock = [NOW]
    a = make_loop(api, tmp_path / "a" / "audit.jsonl", "pod-a", clock)
    b = make_loop(api, tmp_path / "b" / "audit.jsonl", "pod-b", clock)
    for step in range(1, 5):
        clock[0] = NOW + pd.Timedelta(seconds=step * LEASE_S * 0.75)
        assert a.lead(clock[0]) == ""
        assert "pod-a" in b.lead(clock[0])


def test_loop_once_from_the_cli_stands_by_when_another_holds_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    audit, queues, history = tmp_path / "audit.jsonl", tmp_path / "queues.json", tmp_path / "history.csv"
    queues.write_text(json.dumps({"items": [queue_object("team-a", deserved=4, capability=8)]}))
    frame = History({"team-a": (6.0, FRESH)}).history(pd.Timestamp.now(tz="UTC"))
    frame.assign(timestamp=frame["timestamp"].map(pd.Timestamp.isoformat)).to_csv(history, index=False)
    settings = tmp_path / "settings.yaml"
    settings.write_text(f"actuators: {{audit_log: {audit}, plan_dir: {tmp_path / 'plans'}}}\n")
    other = FileLock(audit.with_name(audit.name + ".lock"), identity="pod-a")
    assert other.acquire(NOW) == ""
    args = [
        "loop",
        "--once",
        "--config",
        str(settings),
        "--history",
        str(history),
        "--queues",
        str(queues),
        "--model",
        "seasonal_naive_24",
    ]
    try:
        assert main(args) == 0
    finally:
        other.release()
    out = capsys.readouterr()
    assert "standing by" in out.out and "pod-a" in out.out and out.err == ""
    assert not audit.exists() and not (tmp_path / "plans").exists()
    assert main(args) == 0 and outcomes(audit).count("cycle-done") == 1  # once it is free, it runs


def test_a_loop_mid_cycle_keeps_a_second_one_off_its_audit_log(tmp_path: Path) -> None:
    """No API, plan mode: the local lock alone keeps a second loop on the same log from acting."""
    from tests.loop.test_hardening import make_loop as plan_loop
    from tests.loop.test_hardening import nodes

    history = History({"team-a": (22.0, FRESH), "team-b": (41.0, FRESH)})
    busy, other = plan_loop(tmp_path, history, nodes(12)), plan_loop(tmp_path, history, nodes(12))
    assert busy.lead(NOW) == ""  # inside its cycle
    report = other.run_once()
    assert "audit.jsonl.lock" in report.standby and report.plan is None
    assert not (tmp_path / "audit.jsonl").exists() and not (tmp_path / "plans").exists()
    busy.close()
    assert other.run_once().plan is not None and outcomes(tmp_path / "audit.jsonl").count("cycle-done") == 1
    assert busy.run_once().skipped  # the slot is done: it is not run twice


def test_two_loops_racing_for_an_expired_lease_cannot_both_win(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    clock = [NOW]
    gone = make_loop(api, tmp_path / "old" / "audit.jsonl", "pod-old", clock)
    assert gone.lead(NOW) == ""
    later = NOW + pd.Timedelta(seconds=LEASE_S + 1)
    a = make_loop(api, tmp_path / "a" / "audit.jsonl", "pod-a", clock)
    b = make_loop(api, tmp_path / "b" / "audit.jsonl", "pod-b", clock)
    won: list[str] = []
    # b has read the expired Lease; just before its update lands, a takes it.
    fake.faults.append(Fault(method="PUT", hook=lambda _: won.append(a.lead(later))))
    lost = b.lead(later)
    assert won == [""] and "took" in lost
    assert fake.leases[("gpu-capacity-predictor", "loop")]["spec"]["holderIdentity"] == "pod-a"
