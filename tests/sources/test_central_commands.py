"""Fleets: the commands read a fleet through a real central store and get per-cluster answers
equal to reading each cluster's own Prometheus.

Settings ``clusters: [{name: a}, {name: b}]`` with the central URL: each cluster's rows equal today's
single-cluster command against that cluster's own server (``--prometheus-url``), the ``cluster`` column
(and the ``cluster/`` prefix of series ids) being the only difference; export and the training history are
also compared with settings naming each cluster's own Prometheus (``clusters: [{name: a, prometheus: …}]``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from models.frames import ID
from pipelines.forecast import load_prometheus_history
from predictor.cli import main
from predictor.commands.rightsize import _queue_hours
from predictor.config import load_settings
from predictor.sources.queries import QUEUE_DEMAND
from tests.sources.fleetdata import DAYS, SEEDS
from tests.support.centralprom import CentralStore

pytestmark = pytest.mark.slow
Store = tuple[CentralStore, pd.Timestamp]


@pytest.fixture(scope="module")
def configs(central_store: Store, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``central``: both clusters through the central store; ``own``: each cluster's own Prometheus."""
    store, _ = central_store
    folder = tmp_path_factory.mktemp("fleet-settings")
    out = {"central": folder / "central.yaml", "own": folder / "own.yaml"}
    out["central"].write_text(
        yaml.safe_dump({"prometheus": {"url": store.url}, "clusters": [{"name": name} for name in SEEDS]})
    )
    out["own"].write_text(
        yaml.safe_dump(
            {"clusters": [{"name": name, "prometheus": {"url": url}} for name, url in store.clusters.items()]}
        )
    )
    return out


def _window(start: pd.Timestamp) -> list[str]:
    return ["--start", start.isoformat(), "--end", (start + pd.Timedelta(days=DAYS, minutes=-5)).isoformat()]


def _csv(args: list[str], out: Path) -> pd.DataFrame:
    assert main([*args, "--out", str(out)]) == 0
    return pd.read_csv(out)


def test_rightsize_per_cluster(central_store: Store, configs: dict[str, Path], tmp_path: Path) -> None:
    store, start = central_store
    central = _csv(["--config", str(configs["central"]), "rightsize", *_window(start)], tmp_path / "c.csv")
    assert central.columns[0] == "cluster" and set(central["cluster"]) == set(SEEDS)
    for name, url in store.clusters.items():
        alone = _csv(["rightsize", "--prometheus-url", url, *_window(start)], tmp_path / f"{name}.csv")
        mine = central[central["cluster"] == name].drop(columns="cluster").reset_index(drop=True)
        assert len(alone) > 5
        pd.testing.assert_frame_equal(mine, alone)


def _json(args: list[str], out: Path) -> dict[str, Any]:
    assert main([*args, "--out", str(out)]) == 0
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def test_diagnose_per_cluster(central_store: Store, configs: dict[str, Path], tmp_path: Path) -> None:
    store, start = central_store
    at = ["--at", (start + pd.Timedelta(days=1, hours=3)).isoformat()]
    central = _json(["--config", str(configs["central"]), "diagnose", *at], tmp_path / "c.json")
    assert {f["cluster"] for f in central["findings"]} == set(SEEDS) and set(central["clusters"]) == set(SEEDS)
    for name, url in store.clusters.items():
        alone = _json(["diagnose", "--prometheus-url", url, *at], tmp_path / f"{name}.json")
        mine = [{k: v for k, v in f.items() if k != "cluster"} for f in central["findings"] if f["cluster"] == name]
        assert mine == alone["findings"] and central["clusters"][name]["families"] == alone["families"]


def test_export_per_cluster(central_store: Store, configs: dict[str, Path], tmp_path: Path) -> None:
    store, start = central_store
    args = ["export", "--query", QUEUE_DEMAND, *_window(start), "--step", "1h"]
    central = _csv(["--config", str(configs["central"]), *args], tmp_path / "c.csv")
    own = _csv(["--config", str(configs["own"]), *args], tmp_path / "o.csv")
    pd.testing.assert_frame_equal(central, own)
    for name, url in store.clusters.items():
        alone = _csv([*args, "--prometheus-url", url], tmp_path / f"{name}.csv")
        mine = central[central["cluster"] == name].drop(columns="cluster").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine.assign(**{ID: mine[ID].str.removeprefix(f"{name}/")}), alone)
    only_b = _csv(["--config", str(configs["central"]), *args, "--cluster", "b"], tmp_path / "b.csv")
    pd.testing.assert_frame_equal(only_b, central[central["cluster"] == "b"].reset_index(drop=True))


def test_training_history_per_cluster(central_store: Store, configs: dict[str, Path]) -> None:
    store, start = central_store
    window = {"start": start, "end": start + pd.Timedelta(days=DAYS, hours=-1), "step": "1h"}
    central = load_prometheus_history(load_settings(configs["central"]), **window)  # type: ignore[arg-type]
    own = load_prometheus_history(load_settings(configs["own"]), **window)  # type: ignore[arg-type]
    pd.testing.assert_frame_equal(central, own)
    queues = {name: set(central.loc[central["cluster"] == name, "queue_name"]) for name in SEEDS}
    shared = queues["a"] & queues["b"]
    assert shared and {f"a/{q}" for q in shared} | {f"b/{q}" for q in shared} <= set(central[ID])
    for name, url in store.clusters.items():
        alone = load_prometheus_history(load_settings(None, prometheus={"url": url}), **window)  # type: ignore[arg-type]
        mine = central[central["cluster"] == name].drop(columns="cluster").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine.assign(**{ID: mine[ID].str.removeprefix(f"{name}/")}), alone)
    only_b = load_prometheus_history(load_settings(configs["central"]), clusters=["b"], **window)  # type: ignore[arg-type]
    pd.testing.assert_frame_equal(only_b, central[central["cluster"] == "b"].reset_index(drop=True))
    # train demand's queue hours: the same per cluster, queues named cluster/queue.
    until = (start + pd.Timedelta(days=DAYS)).isoformat()
    hours = _queue_hours(load_settings(configs["central"]), start.isoformat(), until)
    own_hours = _queue_hours(load_settings(configs["own"]), start.isoformat(), until)
    assert hours is not None and own_hours is not None
    pd.testing.assert_frame_equal(hours, own_hours)
    assert {f"{c}/{q}" for c in SEEDS for q in shared} <= set(hours["series_id"])


def test_unknown_cluster_is_one_line_error(
    central_store: Store, configs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, start = central_store
    assert (
        main(
            [
                "--config",
                str(configs["central"]),
                "rightsize",
                "--cluster",
                "c",
                *_window(start),
                "--out",
                str(tmp_path / "x.csv"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err.strip()
    assert "unknown cluster c: the settings list a, b" in err and len(err.splitlines()) == 1


def test_report_per_cluster(central_store: Store, configs: dict[str, Path], tmp_path: Path) -> None:
    store, start = central_store
    args = [
        "report",
        "--end",
        (start + pd.Timedelta(days=DAYS)).isoformat(),
        "--days",
        "8",
        "--window-days",
        "1",
        "--model",
        "seasonal_naive_24",
        "--no-rightsize",
    ]  # rightsize: test_rightsize_per_cluster
    assert main(["--config", str(configs["central"]), *args, "--out", str(tmp_path / "fleet")]) == 0
    fleet = pd.read_csv(tmp_path / "fleet" / "report.csv")
    assert fleet.columns[0] == "cluster" and set(fleet["cluster"]) == set(SEEDS)
    assert set(json.loads((tmp_path / "fleet" / "report.json").read_text())["clusters"]) == set(SEEDS)
    for name, url in store.clusters.items():
        assert main([*args, "--prometheus-url", url, "--out", str(tmp_path / name)]) == 0
        for table in (
            "report.csv",
            "report-summary.csv",
            "inputs/demand.csv",
            "inputs/recommendations.csv",
            "inputs/quotas.csv",
            "inputs/forecast.csv",
        ):
            pd.testing.assert_frame_equal(
                pd.read_csv(tmp_path / "fleet" / name / table), pd.read_csv(tmp_path / name / table)
            )
        mine = fleet[fleet["cluster"] == name].drop(columns="cluster").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, pd.read_csv(tmp_path / name / "report.csv"))


def test_report_with_one_cluster_down_writes_nothing(central_store: Store, tmp_path: Path) -> None:
    store, start = central_store
    settings = tmp_path / "one-down.yaml"
    settings.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {"name": "a", "prometheus": {"url": store.clusters["a"]}},
                    {"name": "b", "prometheus": {"url": "http://127.0.0.1:1", "retries": 0, "timeout_s": 2}},
                ]
            }
        )
    )
    out = tmp_path / "fleet"
    assert (
        main(
            [
                "--config",
                str(settings),
                "report",
                "--end",
                (start + pd.Timedelta(days=DAYS)).isoformat(),
                "--days",
                "8",
                "--window-days",
                "1",
                "--model",
                "seasonal_naive_24",
                "--no-rightsize",
                "--out",
                str(out),
            ]
        )
        == 1
    )
    assert not out.exists()  # not a's report without b's, nor fleet files of a alone
