"""The loop's XDP part without a kernel: network forecast per target, job mix, profile, publication, holds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from kubernetes import client
from prometheus_client import CollectorRegistry, generate_latest

from predictor.actuators import Change
from predictor.actuators.xdp_agent import (
    AgentSettings,
    AgentState,
    ForecastInputs,
    agent_cycle,
    log_lines,
    read_inputs,
    run_agent,
)
from predictor.config import XdpLoopSettings, load_settings
from predictor.errors import ConfigError, DataSourceError
from predictor.loop.xdp import XdpLoop, forecast_target_load, job_mix
from predictor.loop.xdp_io import ConfigMapPublisher, FrameXdpSource
from predictor.planner.xdp_types import Profile
from tests.actuators.fake_apiserver import serve
from tests.support.fake_configmaps import FakeApiServerWithConfigMaps

NOW = pd.Timestamp("2026-11-02T10:20:00Z")
TARGETS = ["ens1f0", "ens1f1"]
NS, CM = "gpu-capacity-predictor-node", "predictor-xdp-inputs"


def network(node: str, loads: dict[str, float], hours: int = 8 * 24, evening_peak: float = 0.0) -> pd.DataFrame:
    """Hourly bits/s per device up to NOW; ``evening_peak`` adds load between 10:00 and 12:00 UTC daily."""
    times = pd.date_range(end=NOW.floor("h"), periods=hours, freq="h")
    peak = np.where((times.hour >= 10) & (times.hour < 12), evening_peak, 0.0)
    rows = [
        pd.DataFrame(
            {"node": node, "device": dev, "direction": direction, "timestamp": times, "value": load * scale + peak}
        )
        for dev, load in loads.items()
        for direction, scale in (("receive", 1.0), ("transmit", 0.6))
    ]
    return pd.concat(rows, ignore_index=True)


def pods(*rows: tuple[str, str, str, str, float]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"node": n, "namespace": "ml", "pod": p, "job": j, "queue": q, "gpus": g} for n, p, j, q, g in rows]
    )


def test_each_target_gets_its_own_seasonal_forecast_and_the_busier_direction() -> None:
    frame = pd.concat(
        [
            network("node-a", {"ens1f0": 2e9, "ens1f1": 9e9}, evening_peak=5e9),
            network("node-b", {"eth0": 8e9}),  # target devices not exported: split evenly
            network("node-c", {"ens1f0": 1e9, "ens1f1": 1e9}, hours=10),
        ]
    )
    loads, skipped = forecast_target_load(frame, TARGETS, NOW)
    # The hour after 10:20 is inside the daily peak: the seasonal mean carries it, receive is the busier side.
    assert loads["node-a"] == pytest.approx({"ens1f0": 7e9, "ens1f1": 14e9})
    assert loads["node-b"] == pytest.approx({"ens1f0": 4e9, "ens1f1": 4e9})
    assert "node-c" not in loads and "24" in skipped["node-c"]


def test_a_node_missing_one_target_is_left_out_with_the_reason() -> None:
    loads, skipped = forecast_target_load(network("node-a", {"ens1f0": 2e9}), TARGETS, NOW)
    assert loads == {} and "ens1f1" in skipped["node-a"]


def test_job_mix_counts_gpus_of_jobs_spanning_nodes() -> None:
    mix = job_mix(
        pods(
            ("n1", "d-0", "dist", "team-a", 4),
            ("n2", "d-1", "dist", "team-a", 4),
            ("n1", "s-0", "solo", "team-b", 2),
            ("n2", "x-0", "", "team-b", 1),
        ),
        {"n1": 8, "n2": 8},
    )
    assert mix["n1"] == (pytest.approx(0.5), {"team-a": 4.0, "team-b": 2.0})
    assert mix["n2"][0] == pytest.approx(0.5)
    assert job_mix(pods(), {}) == {}


def xdp_loop(registry: CollectorRegistry | None = None, publisher: Any = None) -> XdpLoop:
    frame = pd.concat([network("node-a", {"ens1f0": 2e9, "ens1f1": 15e9}), network("node-b", {"eth0": 4e9})])
    source = FrameXdpSource(
        frame,
        pods(("node-a", "d-0", "dist", "team-a", 4), ("node-b", "d-1", "dist", "team-a", 4)),
        {"node-a": 8, "node-b": 8},
    )
    settings = XdpLoopSettings(enabled=True, targets=TARGETS, capacity_bps=25e9)
    return XdpLoop(settings, source, publisher=publisher, registry=registry)


def test_plan_mode_writes_agent_inputs_and_metrics_show_the_profile(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    loop = xdp_loop(registry)
    (tmp_path / "xdp").mkdir()
    (tmp_path / "xdp" / "node-gone.json").write_text("{}")
    report = loop.run(NOW, mode="plan", plan_dir=tmp_path)
    assert [n.node for n in report.nodes] == ["node-a", "node-b"] and not report.error
    assert sorted(p.name for p in (tmp_path / "xdp").iterdir()) == ["_profiles.json", "node-a.json", "node-b.json"]
    inputs = read_inputs(tmp_path / "xdp" / "node-a.json")  # the agent's own reader accepts it
    assert inputs.node == "node-a" and inputs.distributed_share == pytest.approx(0.5)
    assert "seasonal_mean_24" in (inputs.forecaster or "")
    chosen = Profile(**json.loads((tmp_path / "xdp" / "_profiles.json").read_text())["node-a"])
    assert chosen.weights["ens1f0"] > chosen.weights["ens1f1"]  # more spare bandwidth, more weight
    text = generate_latest(registry).decode()
    assert 'predictor_xdp_profile{node="node-a",profile="node-a-spare"} 1.0' in text
    assert f'predictor_xdp_weight{{node="node-a",target="ens1f0"}} {float(chosen.weights["ens1f0"])}' in text


@pytest.fixture
def fake() -> Iterator[FakeApiServerWithConfigMaps]:
    with serve(FakeApiServerWithConfigMaps()) as server:
        yield server


def test_publisher_patches_one_configmap_by_name_and_dry_run_writes_nothing(
    fake: FakeApiServerWithConfigMaps, tmp_path: Path
) -> None:
    fake.add_configmap(NS, CM, {"node-gone.json": "{}", "node-a.json": "old"})
    with client.ApiClient(client.Configuration(host=fake.url)) as api:
        loop = xdp_loop(publisher=ConfigMapPublisher(api, name=CM, namespace=NS))
        report = loop.run(NOW, mode="server-dry-run", plan_dir=tmp_path)
        assert "dryRun" in report.published and fake.configmap_writes == 0
        assert fake.configmaps[(NS, CM)]["data"]["node-a.json"] == "old"
        report = loop.run(NOW, mode="apply", plan_dir=tmp_path)
    assert fake.configmap_writes == 1 and "1 removed" in report.published
    data = fake.configmaps[(NS, CM)]["data"]
    assert sorted(data) == ["node-a.json", "node-b.json"]
    assert ForecastInputs.model_validate_json(data["node-a.json"]) == report.nodes[0].inputs
    assert sorted(p.name for p in (tmp_path / "xdp").iterdir()) == ["_profiles.json"]  # files: plan mode only
    assert {r.method for r in fake.requests} == {"GET", "PATCH"}  # never create


def test_a_missing_configmap_is_reported_not_created(fake: FakeApiServerWithConfigMaps, tmp_path: Path) -> None:
    with client.ApiClient(client.Configuration(host=fake.url)) as api:
        report = xdp_loop(publisher=ConfigMapPublisher(api, name=CM, namespace=NS)).run(
            NOW, mode="apply", plan_dir=tmp_path
        )
    assert "HTTP 404" in report.error and "may not create" in report.error
    assert "node-a" in json.loads((tmp_path / "xdp" / "_profiles.json").read_text())  # still planned


def test_a_source_or_model_failure_is_reported_and_nothing_is_published(tmp_path: Path) -> None:
    class Down(FrameXdpSource):
        def network(self, now: pd.Timestamp) -> pd.DataFrame:
            raise DataSourceError("prometheus: connection refused")

    published: list[Any] = []

    class Publisher:
        def publish(self, documents: Any, *, dry_run: bool) -> str:
            published.append(documents)
            return "patched"

    settings = XdpLoopSettings(enabled=True, targets=TARGETS)
    down = XdpLoop(settings, Down(pd.DataFrame(), pods(), {}), publisher=Publisher())
    assert "connection refused" in down.run(NOW, mode="apply", plan_dir=tmp_path).error and published == []
    empty = network("node-a", {"ens1f0": 1e9, "ens1f1": 1e9}).assign(value=float("nan"))
    nothing = XdpLoop(settings, FrameXdpSource(empty, pods(), {}), publisher=Publisher())
    report = nothing.run(NOW, mode="apply", plan_dir=tmp_path)
    assert report.nodes == [] and "nothing published" in report.error and published == []  # agents' keys kept


def test_enabling_xdp_without_targets_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"loop\.xdp\.targets must name"):
        load_settings(None, loop={"xdp": {"enabled": True}})


class FakeActuator:
    """Enough of ``XdpActuator`` for the agent's hold decisions: a profile in force, plan/apply recorded."""

    def __init__(self) -> None:
        self.applied: list[Any] = []

    def status(self) -> Any:
        class S:
            active_profile, weights, observe, sticky = "n-spare", {"ens1f0": 50, "ens1f1": 50}, False, False

        return S()

    def plan(self, profile: Profile) -> list[Change]:
        return [Change("xdp", "pins", "set-profile", {}, {"profile": profile.name}, "test")]

    def apply(self, changes: list[Any], *, dry_run: bool) -> list[Any]:
        self.applied += changes
        return changes


@pytest.mark.parametrize(
    ("age_s", "node", "loads", "hold"),
    [
        (30, "n", [1e9, 2e9], None),
        (7200, "n", [1e9, 2e9], "stale_inputs"),
        (-3600, "n", [1e9, 2e9], "inputs_invalid"),  # dated in the future: a wrong clock
        (30, "other-node", [1e9, 2e9], "inputs_invalid"),
        (30, "n", [1e9, None], "inputs_invalid"),
    ],
)
def test_agent_holds_the_profile_in_force_on_stale_or_invalid_inputs(
    tmp_path: Path, age_s: float, node: str, loads: list[float | None], hold: str | None
) -> None:
    path = tmp_path / "n.json"
    doc = ForecastInputs(
        generated_at=datetime.now(UTC) - timedelta(seconds=age_s),
        node=node,
        targets=[{"iface": t, "capacity_bps": 25e9, "forecast_bps": f} for t, f in zip(TARGETS, loads, strict=True)],
    )
    path.write_text(doc.model_dump_json())
    settings = AgentSettings(node="n", pin_dir=tmp_path, inputs=path, dry_run=False)
    actuator = FakeActuator()
    result = agent_cycle(settings, actuator, datetime.now(UTC))  # type: ignore[arg-type]
    assert result.hold == hold
    assert bool(actuator.applied) == (hold is None)


def _good_inputs() -> str:
    return ForecastInputs(
        generated_at=datetime.now(UTC),
        node="n",
        targets=[{"iface": t, "capacity_bps": 25e9, "forecast_bps": 1e9} for t in TARGETS],
    ).model_dump_json()


@pytest.mark.parametrize(
    ("spoiled", "says"),
    [
        (b'{"node": "n\xff"}', "not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper"),
        (b'{"node": "n", "targets": [', "not valid JSON"),
    ],
    ids=["not-utf8", "nested-100000", "cut-off"],
)
def test_agent_holds_on_an_unreadable_inputs_file_says_so_once_and_resumes(
    tmp_path: Path, spoiled: bytes, says: str
) -> None:
    """A file the node agent cannot read holds the profile in force (never a crash-loop): one log line for
    the whole hold, the reason on /metrics (``AgentState``), and it acts again once the file is good."""
    path = tmp_path / "n.json"
    path.write_bytes(spoiled)
    settings = AgentSettings(node="n", pin_dir=tmp_path, inputs=path, dry_run=False, max_cycles=4, interval_s=1)
    actuator, state = FakeActuator(), AgentState()
    holds: list[str | None] = []

    def sleep(_: float) -> None:  # between cycles: what the exporter shows, then the loop publishes again
        holds.append(state.hold)
        if len(holds) == 2:
            path.write_text(_good_inputs())

    results = list(run_agent(settings, actuator, sleep=sleep, state=state))  # type: ignore[arg-type]
    assert [r.hold for r in results] == ["inputs_unreadable"] * 2 + [None, None]
    assert holds[:2] == ["inputs_unreadable"] * 2 and state.hold is None
    assert says in (results[0].error or "") and str(path) in (results[0].error or "")
    assert [r.hold for r in log_lines(results)] == ["inputs_unreadable", None, None]
    assert actuator.applied  # resumed
