"""Two loops at once: one acts, the other stands by; a Lease expiry hands over, whatever the pods' clocks say.

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
    clock[0] = NOW + pd.Timedelta(seconds=LEASE_S + 1)  # a stopped renewing (died without releasing)...
    assert "pod-a" in b.run_once().standby  # ...but b first saw the record at 59 s: a full duration from then
    clock[0] = NOW + pd.Timedelta(seconds=LEASE_S - 1 + LEASE_S)
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


def test_a_standby_whose_clock_runs_ahead_never_takes_a_renewed_lease(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    """Pod b's clock is 61 s ahead of pod a's: by a's renewTime the Lease looks expired on b's clock at once.
    Expiry is judged on b's own observation of the record, so b stands by while a renews."""
    a_clock, b_clock = [NOW], [NOW + pd.Timedelta(seconds=61)]
    a = make_loop(api, tmp_path / "a" / "audit.jsonl", "pod-a", a_clock)
    b = make_loop(api, tmp_path / "b" / "audit.jsonl", "pod-b", b_clock)
    for step in range(12):  # four lease durations, a renewing every 20 s
        a_clock[0] = NOW + pd.Timedelta(seconds=20 * step)
        b_clock[0] = a_clock[0] + pd.Timedelta(seconds=61)
        assert a.lead(a_clock[0]) == ""
        assert "pod-a" in b.lead(b_clock[0]), f"b took a renewed Lease at step {step}"
    # a dies: b takes over a full duration (of b's clock) after it last saw the record change
    b_clock[0] += pd.Timedelta(seconds=LEASE_S - 1)
    assert "pod-a" in b.lead(b_clock[0])
    b_clock[0] += pd.Timedelta(seconds=2)
    assert b.lead(b_clock[0]) == ""


def test_a_leader_that_loses_the_lease_mid_apply_stops_patching(
    fake: FakeApiServer, api: client.ApiClient, tmp_path: Path
) -> None:
    """Between the patches of one apply the leader re-reads the Lease: taken meanwhile, the rest is skipped."""
    clock = [NOW]
    a = make_loop(api, tmp_path / "a" / "audit.jsonl", "pod-a", clock)
    lease_key = ("gpu-capacity-predictor", "loop")
    taken = {"done": False}
    sent = a.actuator.apply_all if a.actuator is not None else None
    assert sent is not None

    def take_after_first(*args: object, **kwargs: object) -> object:
        intent = kwargs["on_intent"]

        def steal(change: object) -> None:
            intent(change)  # type: ignore[operator]
            if not taken["done"]:  # another pod takes the Lease right after the first intent
                taken["done"] = True
                fake.leases[lease_key]["spec"]["holderIdentity"] = "pod-b"

        return sent(*args, **{**kwargs, "on_intent": steal})  # type: ignore[arg-type]

    a.actuator.apply_all = take_after_first  # type: ignore[method-assign,union-attr]
    report = a.run_once()
    kinds = [o.outcome for o in report.outcomes]
    assert kinds[0] == "applied" and kinds[1:] == ["skipped"], kinds
    assert "no longer the leader" in report.outcomes[1].message and "pod-b" in report.outcomes[1].message
    assert fake.writes == 1


def test_a_lease_shorter_than_three_renewals_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = tmp_path / "settings.yaml"
    settings.write_text("loop: {lease_duration_s: 5}\n")
    code = main(["--config", str(settings), "loop", "--once", "--history", str(tmp_path / "none.csv")])
    err = capsys.readouterr().err
    assert code == 1 and "lease_duration_s" in err and "3 × lease_renew_s" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


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
    assert "pod-old" in a.lead(NOW) and "pod-old" in b.lead(NOW)  # both see the record; it never changes again
    won: list[str] = []
    # b has read the expired Lease; just before its update lands, a takes it.
    fake.faults.append(Fault(method="PUT", hook=lambda _: won.append(a.lead(later))))
    lost = b.lead(later)
    assert won == [""] and "took" in lost
    assert fake.leases[("gpu-capacity-predictor", "loop")]["spec"]["holderIdentity"] == "pod-a"
