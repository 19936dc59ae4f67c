"""The planner's pieces on small, hand-checked examples: quantities, parsing, targets and each safety rule."""

from __future__ import annotations

import pandas as pd
import pytest

from predictor.errors import InputError
from predictor.planner import (
    Memory,
    PlannerSettings,
    QueueLimits,
    QueueState,
    allocatable_from_nodes,
    check_invariants,
    forecast_targets,
    format_quantity,
    from_milli,
    parse_quantity,
    plan_queues,
    queues_from_list,
    targets_from_mapping,
)
from tests.actuators.fake_apiserver import queue_object

GPU = "nvidia.com/gpu"
NOW = pd.Timestamp("2026-11-02T00:00:00Z")
POLICY = PlannerSettings()  # type: ignore[call-arg]


def policy(**changes: object) -> PlannerSettings:
    return PlannerSettings.model_validate({**POLICY.model_dump(), **changes})


@pytest.mark.parametrize(
    ("text", "gpus"),
    [("8", 8.0), ("8000m", 8.0), ("1k", 1000.0), (8, 8.0), ("1.5", 1.5), ("2Ki", 2048.0), ("1e3", 1000.0)],
)
def test_quantities_parse(text: object, gpus: float) -> None:
    assert parse_quantity(text, what="x") == gpus


def test_quantities_are_written_as_kubernetes_strings() -> None:
    assert format_quantity(8.0) == "8" and format_quantity(1.5) == "1500m" and from_milli(8000) == 8.0
    with pytest.raises(InputError, match="x: '8x' is not a Kubernetes quantity"):
        parse_quantity("8x", what="x")


def test_queue_list_parsing_reads_status_annotations_and_milli_units() -> None:
    doc = {
        "kind": "List",
        "items": [
            queue_object("a", deserved=16, capability=32, guarantee=4, allocated=10),
            queue_object("b", deserved=8, capability=8, managed=False, parent="a"),
        ],
    }
    a, b = queues_from_list(doc)
    assert (a.deserved[GPU], a.capability[GPU], a.guarantee[GPU], a.allocated[GPU]) == (16, 32, 4, 10)
    assert not b.managed and b.parent == "a"
    doc["items"][0]["status"]["allocated"][GPU] = "10k"  # a Volcano build writing milli-units
    assert queues_from_list(doc, allocated_milli=True)[0].allocated[GPU] == 10
    with pytest.raises(InputError, match=r"queues.json: queue 'a': spec.weight"):
        doc["items"][0]["spec"]["weight"] = 0
        queues_from_list(doc, source="queues.json")


def test_allocatable_skips_not_ready_and_cordoned_nodes() -> None:
    def node(name: str, gpus: str, ready: str = "True", cordoned: bool = False) -> dict[str, object]:
        return {
            "metadata": {"name": name},
            "spec": {"unschedulable": cordoned},
            "status": {"allocatable": {GPU: gpus}, "conditions": [{"type": "Ready", "status": ready}]},
        }

    doc = {"items": [node("n1", "8"), node("n2", "8", ready="False"), node("n3", "8", cordoned=True), node("n4", "7")]}
    assert allocatable_from_nodes(doc, [GPU]) == {GPU: 15.0}


def forecast(values: dict[str, float], hours: int = 48, spread: float = 4.0) -> pd.DataFrame:
    rows = []
    for queue, level in values.items():
        for h in range(hours):
            rows.append(
                {
                    "series_id": queue,
                    "timestamp": NOW + pd.Timedelta(hours=h),
                    "mean": level,
                    "lo-80": level - spread,
                    "hi-80": level + spread,
                    "lo-95": level - 2 * spread,
                    "hi-95": level + 2 * spread,
                }
            )
    return pd.DataFrame(rows)


def test_targets_use_the_configured_quantiles_headroom_and_rounding() -> None:
    (target,) = forecast_targets(forecast({"a": 20.0}), policy(round_to=8), now=NOW).values()
    assert target.deserved == 32.0  # hi-80 24 × 1.1 = 26.4 → next multiple of 8
    assert target.capability == 32.0  # hi-95 28 × 1.1 = 30.8 → 32
    assert target.guarantee == 16.0  # lo-80 16, floored to 8s
    with_demand = forecast_targets(
        forecast({"a": 20.0}), POLICY, now=NOW, demand=pd.DataFrame({"queue": ["a"], "peak": [40.0]})
    )
    assert with_demand[("a", GPU)].deserved == 44.0 and "demand peak" in with_demand[("a", GPU)].basis
    limited = forecast_targets(forecast({"a": 20.0}), policy(queues={"a": {"max_deserved": 10}}), now=NOW)
    assert limited[("a", GPU)].deserved == 10.0


def test_a_forecast_that_ends_before_now_gives_no_target() -> None:
    assert forecast_targets(forecast({"a": 20.0}, hours=2), POLICY, now=NOW + pd.Timedelta(hours=5)) == {}
    with pytest.raises(InputError, match="missing column 'hi-80'"):
        forecast_targets(forecast({"a": 1.0}).drop(columns=["hi-80"]), POLICY, now=NOW)


def q(name: str, d: float, c: float, g: float = 0.0, alloc: float = 0.0, **kw: object) -> QueueState:
    return QueueState(
        name=name, deserved={GPU: d}, capability={GPU: c}, guarantee={GPU: g}, allocated={GPU: alloc}, **kw
    )  # type: ignore[arg-type]


def one(queues: list[QueueState], targets: dict[str, tuple[float, float, float]], **kw: object) -> object:
    return plan_queues(queues, targets_from_mapping({(k, GPU): v for k, v in targets.items()}), POLICY, now=NOW, **kw)  # type: ignore[arg-type]


def test_growth_is_clipped_to_the_max_step_with_its_reason() -> None:
    plan = one([q("a", 10, 20)], {"a": (40, 40, 0)})
    change = next(c for c in plan.changes if c.field == "deserved")  # type: ignore[attr-defined]
    assert (change.before, change.after, change.code) == (10, 18, "max_step")
    assert "max step 8" in change.reason


def test_shrinking_waits_for_the_stabilisation_window_and_stops_at_allocated() -> None:
    first = one([q("a", 40, 40, alloc=30)], {"a": (10, 10, 0)})
    assert first.changes == () and {h.code for h in first.held} == {"stabilising"}  # type: ignore[attr-defined]
    old = Memory({f"a|{f}|{GPU}": ((NOW.timestamp() - 7 * 3600, 10.0),) for f in ("deserved", "capability")})
    plan = one([q("a", 40, 40, alloc=30)], {"a": (10, 10, 0)}, memory=old)
    deserved = next(c for c in plan.changes if c.field == "deserved")  # type: ignore[attr-defined]
    assert deserved.after == 30 and deserved.code == "below_allocated"


def test_protected_opted_out_cooldown_and_no_forecast_are_held_with_reasons() -> None:
    queues = [q("root", 1, 1), q("default", 1, 1), q("off", 1, 1, managed=False), q("cool", 1, 1), q("none", 1, 1)]
    plan = one(
        queues, {"root": (9, 9, 0), "off": (9, 9, 0), "cool": (9, 9, 0)}, last_changed={"cool": NOW.timestamp() - 60}
    )
    codes = {h.queue: h.code for h in plan.held}  # type: ignore[attr-defined]
    assert codes == {
        "root": "protected",
        "default": "protected",
        "off": "opted_out",
        "cool": "cooldown",
        "none": "no_forecast",
    }
    assert plan.changes == ()  # type: ignore[attr-defined]


def test_hold_all_changes_nothing() -> None:
    plan = one([q("a", 10, 20)], {"a": (40, 40, 0)}, hold_all=("stale_data", "newest sample is 5 h old"))
    assert plan.changes == () and plan.held[0].reason == "newest sample is 5 h old"  # type: ignore[attr-defined]


def test_children_never_outgrow_their_parent_and_guarantees_fit_live_gpus() -> None:
    queues = [q("team", 20, 40), q("team-x", 10, 20, parent="team"), q("team-y", 10, 20, parent="team")]
    plan = one(queues, {"team-x": (16, 20, 0), "team-y": (16, 20, 0)})
    assert check_invariants(queues, dict(plan.desired)) == []  # type: ignore[attr-defined]
    assert any(h.code == "parent_sum" for h in plan.held)  # type: ignore[attr-defined]
    managed_parent = one(queues, {"team": (20, 40, 0), "team-x": (16, 20, 0), "team-y": (16, 20, 0)})
    assert managed_parent.desired["team"].deserved[GPU] == 32  # type: ignore[attr-defined]
    tight = one(
        [q("a", 10, 10, g=4), q("b", 10, 10, g=4)], {"a": (10, 10, 8), "b": (10, 10, 8)}, allocatable={GPU: 10.0}
    )
    assert sum(s.guarantee[GPU] for s in tight.desired.values()) <= 10  # type: ignore[attr-defined]


def test_proportion_mode_sets_weight_from_deserved() -> None:
    plan = plan_queues(
        [q("a", 10, 20)], targets_from_mapping({("a", GPU): (16, 20, 0)}), policy(plugin="proportion"), now=NOW
    )
    assert plan.desired["a"].weight == 16 and any(c.field == "weight" for c in plan.changes)


def test_settings_reject_a_shrink_window_shorter_than_the_grow_window() -> None:
    with pytest.raises(ValueError, match="shrink slower than grow"):
        policy(grow_window_s=7200, shrink_window_s=60)
    assert QueueLimits(max_deserved=4).max_deserved == 4  # type: ignore[call-arg]


def test_targets_beyond_the_live_cluster_are_capped_at_allocatable() -> None:
    old = Memory()
    plan = one([q("a", 50, 56)], {"a": (500, 900, 0)}, allocatable={GPU: 64.0}, memory=old)
    after = plan.desired["a"]  # type: ignore[attr-defined]
    assert after.deserved[GPU] == 64 and after.capability[GPU] == 64
    assert "capped at live allocatable 64" in next(c.reason for c in plan.changes)  # type: ignore[attr-defined]


def test_deserved_targets_are_fitted_to_the_live_cluster() -> None:
    """Leaf deserved targets summing past the cluster are scaled by one factor; the parent is left alone."""
    queues = [q("a", 40, 100), q("b", 20, 100), q("team", 60, 100), q("c", 10, 100, parent="team")]
    targets = {"a": (90, 100, 10), "b": (45, 100, 0), "c": (15, 100, 0), "team": (15, 100, 0)}
    loose = policy(max_step_abs=1000.0, max_step_rel=10.0, shrink_window_s=0.0, cooldown_s=0.0)
    plan = plan_queues(
        queues,
        targets_from_mapping({(k, GPU): v for k, v in targets.items()}),
        loose,
        now=NOW,
        allocatable={GPU: 100.0},
    )
    desired = {name: state.deserved[GPU] for name, state in plan.desired.items()}  # type: ignore[attr-defined]
    assert desired["a"] + desired["b"] + desired["c"] <= 100
    assert (desired["a"], desired["b"], desired["c"]) == (60, 30, 10)  # 90:45:15 scaled by 100/150
    assert desired["a"] >= desired["b"] >= desired["c"]
    reason = next(c.reason for c in plan.changes if c.queue == "a" and c.field == "deserved")  # type: ignore[attr-defined]
    assert "Σ deserved ≤ live allocatable 100" in reason
    off = plan_queues(
        queues,
        targets_from_mapping({(k, GPU): v for k, v in targets.items()}),
        policy(
            fit_deserved_to_cluster=False, max_step_abs=1000.0, max_step_rel=10.0, shrink_window_s=0.0, cooldown_s=0.0
        ),
        now=NOW,
        allocatable={GPU: 100.0},
    )
    assert off.desired["a"].deserved[GPU] == 90  # type: ignore[attr-defined]
