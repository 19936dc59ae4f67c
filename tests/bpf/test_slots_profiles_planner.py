"""Pure parts of the XDP feature (no root needed): slot-table maths, the profile model, the planner."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predictor.actuators import Change
from predictor.actuators.xdp_maps import LEGACY_SEED, LUT, Table
from predictor.actuators.xdp_profiles import dump_profile, load_profile
from predictor.errors import InputError
from predictor.planner.xdp_profiles import JobMix, TargetLoad, XdpPolicy, choose_profile
from predictor.planner.xdp_slots import (
    LUT_SIZE,
    apportion,
    build_table,
    flow_hash,
    moved_fraction,
    rebalance,
    total_variation,
)
from predictor.planner.xdp_types import Profile

weights_st = st.lists(st.integers(0, 20), min_size=2, max_size=8).filter(lambda w: sum(w) > 0)


@given(weights_st)
def test_apportion_is_exact_and_proportional(weights: list[int]) -> None:
    counts = apportion(weights)
    assert sum(counts) == LUT_SIZE
    for w, c in zip(weights, counts, strict=True):
        assert abs(c - w * LUT_SIZE / sum(weights)) < 1
        assert (c == 0) == (w == 0) or w * LUT_SIZE / sum(weights) < 1


@settings(max_examples=200)
@given(weights_st, st.data())
def test_rebalance_moves_no_more_than_needed(old: list[int], data: st.DataObject) -> None:
    new = data.draw(st.lists(st.integers(0, 20), min_size=len(old), max_size=len(old)).filter(lambda w: sum(w) > 0))
    before = build_table(old)
    after = rebalance(before, new)
    assert [after.count(i) for i in range(len(new))] == apportion(new)
    # Slot-level optimum: exactly the slots by which the counts differ (≤ TV distance + rounding).
    needed = sum(max(0, a - b) for a, b in zip(apportion(old), apportion(new), strict=True)) / LUT_SIZE
    assert moved_fraction(before, after) == pytest.approx(needed)
    assert moved_fraction(before, after) <= total_variation(old, new) + len(old) / LUT_SIZE


@pytest.mark.parametrize(
    ("old", "new", "naive_at_least"),
    [([1, 1, 1, 1], [1, 1, 1, 2], 0.5), ([2, 1], [1, 2], 0.9), ([1, 1, 1, 1], [1, 1, 1, 0], 0.5)],
)
def test_min_move_beats_a_rebuild(old: list[int], new: list[int], naive_at_least: float) -> None:
    before = build_table(old)
    assert moved_fraction(before, build_table(new)) >= naive_at_least
    assert moved_fraction(before, rebalance(before, new)) == pytest.approx(total_variation(old, new), abs=0.01)


def test_tables_interleave_targets() -> None:
    table = build_table([1, 1, 2])
    assert max(len(run) for run in "".join(map(str, table)).split("2")) <= 2  # no long runs of one target


@pytest.mark.parametrize("seed", [LEGACY_SEED, 0, 0xFFFFFFFF, 0x1234ABCD])
def test_flow_hash_spreads_ports_evenly(seed: int) -> None:
    # Plain FNV modulo a small table follows port parity; the fmix finish must not, whatever the seed.
    buckets = [0, 0]
    for port in range(1024, 3072):
        buckets[flow_hash("198.51.100.1", "192.0.2.1", 17, port, 80, seed=seed) % 2] += 1
    assert abs(buckets[0] - buckets[1]) < 150


def test_the_seed_changes_where_flows_land() -> None:
    flows = [("198.51.100.1", port) for port in range(1024, 2048)]
    a = [flow_hash(src, "192.0.2.1", 17, port, 80, seed=1) % LUT_SIZE for src, port in flows]
    b = [flow_hash(src, "192.0.2.1", 17, port, 80, seed=2) % LUT_SIZE for src, port in flows]
    assert sum(x != y for x, y in zip(a, b, strict=True)) > 0.9 * len(flows)


def test_table_layout_matches_the_c_struct() -> None:
    assert LUT.size == 4 + 4 + 16 * 4 + 32 + LUT_SIZE * 4  # struct lut in bpf/xdp_lb.h
    table = Table("p", 3, (1, 2), tuple(build_table([1, 2])))
    back = Table.unpack(table.pack())
    assert back.name == "p" and back.flags == 3 and back.weights[:3] == (1, 2, 0) and back.slots == table.slots
    assert struct.unpack_from("<I", table.pack(), 4)[0] == LUT_SIZE


def test_profile_yaml_roundtrip_and_errors(tmp_path: Path) -> None:
    p = Profile(name="even", weights={"eth1": 1, "eth2": 1}, observe=True)
    f = tmp_path / "p.yaml"
    f.write_text(dump_profile(p))
    assert load_profile(f) == p
    for text, needle in [
        ("name: x\nweights: {eth1: -1}\n", "negative"),
        ("name: x\nweights: {eth1: 0}\n", "positive"),
        ("name: x\n", "weights"),
        ("weights: {eth1: 1}\nname: " + "n" * 40 + "\n", "name"),
        ("- a\n", "mapping"),
        ("name: [\n", "YAML"),
    ]:
        f.write_text(text)
        with pytest.raises(InputError, match=needle) as info:
            load_profile(f)
        assert "\n" not in str(info.value) and str(f) in str(info.value)
    with pytest.raises(InputError, match="cannot read"):
        load_profile(tmp_path / "missing.yaml")


def test_change_is_plain_data() -> None:
    c = Change("xdp", "/sys/fs/bpf/x", "set-profile", {"profile": "a"}, {"profile": "b"}, "why")
    assert c.to_dict()["after"] == {"profile": "b"}


TARGETS = [TargetLoad("eth1", 100e9, 20e9), TargetLoad("eth2", 100e9, 60e9), TargetLoad("eth3", 0, 0)]


def test_planner_weights_by_spare_bandwidth() -> None:
    p = choose_profile("node-a", TARGETS, JobMix(), forecast_age_s=10)
    # spare = 90-20=70 and 90-60=30 Gb/s; eth3 is down.
    assert p.weights == {"eth1": 70, "eth2": 30, "eth3": 0}
    assert not p.observe and not p.sticky and p.name == "node-a-spare"


def test_planner_job_mix_adds_headroom_and_stickiness() -> None:
    p = choose_profile("node-a", TARGETS, JobMix(distributed_share=1.0), forecast_age_s=10)
    assert p.sticky
    assert p.weights["eth1"] / p.weights["eth2"] > 70 / 30  # less spare for both: the ratio skews further


def test_planner_observes_when_stale_or_missing() -> None:
    stale = choose_profile("node-a", TARGETS, JobMix(), forecast_age_s=10_000)
    assert stale.observe and stale.name == "node-a-observe"
    missing = [TargetLoad("eth1", 1e9, None), TargetLoad("eth2", 1e9, 1e8)]
    assert choose_profile("n", missing, JobMix(), forecast_age_s=1).observe


def test_planner_saturated_falls_back_to_capacity_and_keeps_targets_warm() -> None:
    loads = [TargetLoad("eth1", 10e9, 50e9), TargetLoad("eth2", 30e9, 50e9)]
    assert choose_profile("n", loads, JobMix(), forecast_age_s=1).weights == {"eth1": 25, "eth2": 75}
    loads = [TargetLoad("eth1", 100e9, 0), TargetLoad("eth2", 100e9, 95e9)]
    assert choose_profile("n", loads, JobMix(), forecast_age_s=1).weights["eth2"] == 1


def test_planner_dead_band_prevents_flip_flop() -> None:
    first = choose_profile("n", TARGETS, JobMix(), forecast_age_s=1)
    nudged = [TargetLoad("eth1", 100e9, 21e9), TargetLoad("eth2", 100e9, 59e9), TargetLoad("eth3", 0, 0)]
    assert choose_profile("n", nudged, JobMix(), forecast_age_s=1, current=first) is first
    moved = [TargetLoad("eth1", 100e9, 60e9), TargetLoad("eth2", 100e9, 20e9), TargetLoad("eth3", 0, 0)]
    assert choose_profile("n", moved, JobMix(), forecast_age_s=1, current=first) != first


@given(st.lists(st.tuples(st.floats(0, 1e11), st.floats(0, 1e11)), min_size=1, max_size=6), st.floats(0, 1))
def test_planner_always_returns_a_valid_profile(loads: list[tuple[float, float]], share: float) -> None:
    targets = [TargetLoad(f"eth{i}", c, f) for i, (c, f) in enumerate(loads)]
    if sum(c for c, _ in loads) <= 0:
        with pytest.raises(InputError):
            choose_profile("n", targets, JobMix(), forecast_age_s=1)
        return
    p = choose_profile("n", targets, JobMix(distributed_share=share), forecast_age_s=1)
    assert sum(p.weights.values()) > 0
    assert all(p.weights[t.iface] == 0 for t in targets if t.capacity_bps == 0)


def test_policy_is_bounded() -> None:
    with pytest.raises(ValueError):
        XdpPolicy(base_headroom=1.5)
