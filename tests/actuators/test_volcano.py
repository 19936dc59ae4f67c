"""The Volcano actuator against a fake API server over real HTTP, with the real ``kubernetes`` client.

No kube-apiserver (nor envtest's binaries) can be installed on this machine, so these tests use
``tests.actuators.fake_apiserver``: a local HTTP server that serves Queue objects with status, applies
merge patches with resourceVersion checks, enforces the Volcano webhook's quota ordering and records
every request. The client is never mocked.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from predictor.actuators import Change
from predictor.actuators.volcano import VolcanoActuator
from predictor.planner import Memory, PlannerSettings, plan_queues, queues_from_list, targets_from_mapping
from tests.actuators.fake_apiserver import FakeApiServer, Fault, queue_object, serve_team_queues

GPU = "nvidia.com/gpu"
# Capability from the given targets (borrow: forecast), so the patches below carry the values the tests set.
POLICY = PlannerSettings(borrow="forecast")  # type: ignore[call-arg]


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with serve_team_queues() as server:
        yield server


@pytest.fixture
def actuator(fake: FakeApiServer) -> Iterator[VolcanoActuator]:
    with client.ApiClient(client.Configuration(host=fake.url)) as api:
        yield VolcanoActuator(api, timeout_s=0.5, retries=2)


def planned(actuator: VolcanoActuator, targets: dict[tuple[str, str], tuple[float, float, float]]) -> list[Change]:
    queues = queues_from_list(actuator.list_queues())
    plan = plan_queues(queues, targets_from_mapping(targets), POLICY, now=1e9, allocatable={GPU: 128.0})
    return actuator.plan(plan)


def gpu(fake: FakeApiServer, name: str) -> tuple[str, str, str]:
    spec: dict[str, Any] = fake.queues[name]["spec"]
    return spec["guarantee"]["resource"][GPU], spec["deserved"][GPU], spec["capability"][GPU]


def test_apply_patches_all_three_fields_in_one_merge_patch_with_resource_version(
    fake: FakeApiServer, actuator: VolcanoActuator
) -> None:
    changes = planned(actuator, {("team-a", GPU): (20, 30, 6)})
    assert [c.target for c in changes] == ["team-a"]
    applied = actuator.apply(changes, dry_run=False)
    assert applied == changes
    assert gpu(fake, "team-a") == ("6", "20", "32") or gpu(fake, "team-a") == ("6", "20", "30")
    (patch,) = fake.patches()
    assert patch.content_type == "application/merge-patch+json"
    assert patch.body["metadata"]["resourceVersion"]
    assert set(patch.body["spec"]) == {"deserved", "capability", "guarantee"}
    assert all(isinstance(v, str) for v in patch.body["spec"]["deserved"].values())
    assert fake.queues["team-a"]["spec"]["deserved"]["memory"] == "2Ti"  # untouched resources keep their spelling


def test_plan_is_empty_once_converged(fake: FakeApiServer, actuator: VolcanoActuator) -> None:
    actuator.apply(planned(actuator, {("team-a", GPU): (20, 30, 6)}), dry_run=False)
    assert planned(actuator, {("team-a", GPU): (20, 30, 6)}) == []


def test_server_dry_run_sends_dry_run_all_and_changes_nothing(fake: FakeApiServer, actuator: VolcanoActuator) -> None:
    before = gpu(fake, "team-a")
    outcomes = actuator.apply_all(planned(actuator, {("team-a", GPU): (20, 30, 6)}), dry_run=True)
    assert [o.outcome for o in outcomes] == ["dry-run-ok"]
    assert gpu(fake, "team-a") == before
    assert len(fake.patches(dry_run=True)) == 1 and fake.patches(dry_run=False) == []


def test_conflict_is_retried_after_a_fresh_read(fake: FakeApiServer, actuator: VolcanoActuator) -> None:
    changes = planned(actuator, {("team-a", GPU): (20, 30, 6)})
    fake.faults.append(Fault(status=409))
    assert [o.outcome for o in actuator.apply_all(changes, dry_run=False)] == ["applied"]
    assert len(fake.patches()) == 2 and gpu(fake, "team-a")[1] == "20"


def test_status_update_in_between_is_a_real_409_then_applied(fake: FakeApiServer, actuator: VolcanoActuator) -> None:
    changes = planned(actuator, {("team-a", GPU): (20, 30, 6)})
    # The scheduler bumps status.allocated (and the resourceVersion) after the plan was read.
    fake.edit("team-a", lambda q: q["status"]["allocated"].update({GPU: "11"}))
    fresh = fake.queues["team-a"]["metadata"]["resourceVersion"]
    outcomes = actuator.apply_all(changes, dry_run=False)
    assert [o.outcome for o in outcomes] == ["applied"]
    assert changes[0].before["resourceVersion"] != fresh
    assert fake.patches()[0].body["metadata"]["resourceVersion"] == fresh


def test_someone_elses_quota_edit_is_never_overwritten(fake: FakeApiServer, actuator: VolcanoActuator) -> None:
    changes = planned(actuator, {("team-a", GPU): (20, 30, 6)})
    fake.edit("team-a", lambda q: q["spec"]["deserved"].update({GPU: "24"}))
    (outcome,) = actuator.apply_all(changes, dry_run=False)
    assert outcome.outcome == "conflict" and "changed since the plan" in outcome.message
    assert gpu(fake, "team-a")[1] == "24" and fake.patches() == []


def test_allocation_growing_past_a_planned_shrink_stops_it(fake: FakeApiServer, actuator: VolcanoActuator) -> None:
    fake.add(queue_object("team-c", deserved=40, capability=40, allocated=10))
    queues = queues_from_list(actuator.list_queues())
    series = {"team-c|deserved|nvidia.com/gpu": ((1e9 - 8 * 3600, 30.0),)}
    plan = plan_queues(
        queues, targets_from_mapping({("team-c", GPU): (30, 40, 0)}), POLICY, now=1e9, memory=Memory(series)
    )
    changes = actuator.plan(plan)
    assert changes and changes[0].after["spec"]["deserved"][GPU] == "30"
    fake.edit("team-c", lambda q: q["status"]["allocated"].update({GPU: "36"}))
    (outcome,) = actuator.apply_all(changes, dry_run=False)
    assert outcome.outcome == "conflict" and "below allocated" in outcome.message
    assert fake.patches() == []


def test_intended_deserved_below_allocated_is_sent_after_a_status_update(
    fake: FakeApiServer, actuator: VolcanoActuator
) -> None:
    # planner.deserved_below_allocated: deserved below what the queue holds is the plan (so reclaim can take the
    # borrowed GPUs back), so the scheduler bumping status.allocated in between is no conflict for deserved.
    fake.add(queue_object("team-c", deserved=40, capability=40, allocated=10))
    queues = queues_from_list(actuator.list_queues())
    series = {"team-c|deserved|nvidia.com/gpu": ((1e9 - 8 * 3600, 30.0),)}
    below = PlannerSettings(borrow="idle", deserved_below_allocated=True)  # type: ignore[call-arg]
    targets = targets_from_mapping({("team-c", GPU): (30, 40, 0)})
    plan = plan_queues(queues, targets, below, now=1e9, memory=Memory(series), allocatable={GPU: 128.0})
    changes = [c for c in actuator.plan(plan) if c.target == "team-c"]
    assert changes and changes[0].after["spec"]["deserved"][GPU] == "30"
    fake.edit("team-c", lambda q: q["status"]["allocated"].update({GPU: "36"}))
    (outcome,) = actuator.apply_all(changes, dry_run=False)
    assert outcome.outcome == "applied", outcome.message
    assert fake.queues["team-c"]["spec"]["deserved"][GPU] == "30"


def test_webhook_rejection_is_permanent_and_not_retried(fake: FakeApiServer, actuator: VolcanoActuator) -> None:
    changes = planned(actuator, {("team-a", GPU): (20, 30, 6)})
    fake.faults.append(Fault(status=422))
    (outcome,) = actuator.apply_all(changes, dry_run=False)
    assert outcome.outcome == "rejected" and "422" in outcome.message
    assert len(fake.patches()) == 1


def test_timeout_that_landed_is_recognised_not_repeated(fake: FakeApiServer, actuator: VolcanoActuator) -> None:
    changes = planned(actuator, {("team-a", GPU): (20, 30, 6)})
    writes_before = fake.writes
    fake.faults.append(Fault(delay_s=1.0))  # longer than the client's 0.5 s timeout; the patch still lands
    (outcome,) = actuator.apply_all(changes, dry_run=False)
    assert outcome.outcome == "applied"
    time.sleep(1.2)  # let the slow first patch land (or be refused)
    assert gpu(fake, "team-a")[1] == "20"
    # Whichever of the two sends arrived second carried a stale resourceVersion: one write took effect.
    assert fake.writes == writes_before + 1


def test_timeout_and_unavailable_give_up_after_the_retries(fake: FakeApiServer, actuator: VolcanoActuator) -> None:
    changes = planned(actuator, {("team-a", GPU): (20, 30, 6)})
    fake.faults += [Fault(status=503), Fault(status=503), Fault(status=503)]
    (outcome,) = actuator.apply_all(changes, dry_run=False)
    assert outcome.outcome == "failed" and "503" in outcome.message
    assert gpu(fake, "team-a")[1] == "16"


def test_an_invalid_object_is_never_sent(fake: FakeApiServer, actuator: VolcanoActuator) -> None:
    rv = fake.queues["team-a"]["metadata"]["resourceVersion"]
    bad = Change(
        "volcano",
        "team-a",
        "patch-queue",
        before={"resourceVersion": rv, "resources": [GPU]},
        after={"spec": {"deserved": {GPU: "40"}, "capability": {GPU: "32"}}},
    )
    (outcome,) = actuator.apply_all([bad], dry_run=False)
    assert outcome.outcome == "rejected" and "exceeds capability" in outcome.message
    floaty = Change(
        "volcano",
        "team-a",
        "patch-queue",
        before={"resourceVersion": rv, "resources": [GPU]},
        after={"spec": {"deserved": {GPU: 20.0}}},
    )
    (outcome,) = actuator.apply_all([floaty], dry_run=False)
    assert outcome.outcome == "rejected" and "CRD schema" in outcome.message
    assert fake.patches() == []


def test_shrinks_go_first_and_a_failed_growth_skips_the_rest(fake: FakeApiServer, actuator: VolcanoActuator) -> None:
    fake.add(queue_object("team-c", deserved=10, capability=20, allocated=0))
    changes = planned(actuator, {("team-a", GPU): (20, 30, 6), ("team-c", GPU): (14, 20, 0)})
    assert {c.target for c in changes} == {"team-a", "team-c"}
    fake.faults.append(Fault(status=422))
    outcomes = actuator.apply_all(changes, dry_run=False)
    assert [o.outcome for o in outcomes] == ["rejected", "skipped"]


def test_list_parses_queues_with_status(actuator: VolcanoActuator) -> None:
    queues = {q.name: q for q in queues_from_list(actuator.list_queues())}
    assert queues["team-b"].allocated[GPU] == 12 and queues["team-b"].resource_version
