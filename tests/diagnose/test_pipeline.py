"""``predictor train rca`` on a real MLflow store: register, champion/challenger gate, load by alias."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from models.rca_profiles import PROFILES
from pipelines.rca import RcaJob, profile_tag, train_rca
from pipelines.rca_data import Scenario, incident_windows, read_incidents, simulate_scenario, to_long_frame
from pipelines.rca_incidents import incident_rows, resolve_incidents
from predictor.cli import main
from predictor.config import Settings
from predictor.diagnose.models import FAMILY, load_registry
from predictor.errors import InputError
from predictor.registry import CHAMPION, ModelRegistry
from predictor.sources.files import FileSource

TINY_TRAIN = (Scenario(seed=31, nodes=4, fault_rate_per_day=90, days=0.3),)
TINY_TEST = (Scenario(seed=32, nodes=4, fault_rate_per_day=90, days=0.3),)


@pytest.mark.slow
def test_train_register_gate_and_serve(mlflow_settings: Settings, tmp_path: Path, rca_cache: Path) -> None:
    run = simulate_scenario(TINY_TRAIN[0])
    history, incidents = tmp_path / "h.parquet", tmp_path / "incidents.csv"
    to_long_frame(run).to_parquet(history)
    faults = run.faults[run.faults["node"] != ""].iloc[:2]
    incidents.write_text(
        "time,scope,cause\n"
        + "".join(
            f"{(f['start'] + pd.Timedelta(minutes=20)).isoformat()},node={f['node']},{f['cause']}\n"
            for _, f in faults.iterrows()
        )
    )
    job = RcaJob(
        cache_dir=rca_cache,
        train_scenarios=TINY_TRAIN,
        heldout_scenarios=TINY_TEST,
        save=tmp_path / "rca.json",
        incidents=incidents,
        history=history,
    )
    registry = ModelRegistry(mlflow_settings.mlflow)
    first = train_rca(mlflow_settings, job, registry=registry)
    assert first.promoted and first.version == "1"
    assert 0 <= first.report.macro_f1 <= 1 and (tmp_path / "rca.json").is_file()
    info = registry.get(FAMILY, CHAMPION)
    assert info is not None and info.version == "1" and "macro_f1" in info.metrics

    again = train_rca(mlflow_settings, job, registry=registry)  # same data: not strictly better
    assert again.version == "2" and not again.promoted
    assert again.champion_macro_f1 == pytest.approx(first.report.macro_f1)
    assert registry.get(FAMILY, CHAMPION).version == "1"  # type: ignore[union-attr]

    assert first.real_incidents == 2 and "2 real incident(s)" in first.summary()
    assert info.tags["real_incidents"] == "2"
    assert all(0 <= float(info.tags[profile_tag(p)]) <= 1 for p in PROFILES)
    served = load_registry(mlflow_settings.mlflow)
    assert set(served.models) == set(PROFILES)
    tree = served.models["dcgm-default"]
    rows = pd.DataFrame([[0.0] * tree.n_features_in_], columns=tree.feature_names_in_)
    assert tree.predict(rows)[0] in set(tree.classes_)


@pytest.mark.slow
def test_cli_diagnose_uses_the_registry_champion(mlflow_settings: Settings, tmp_path: Path, rca_cache: Path) -> None:
    job = RcaJob(cache_dir=rca_cache, train_scenarios=TINY_TRAIN, heldout_scenarios=TINY_TEST)
    train_rca(mlflow_settings, job)
    run = simulate_scenario(TINY_TEST[0])
    history = tmp_path / "h.parquet"
    to_long_frame(run).to_parquet(history)
    at = (pd.Timestamp(run.grid.end_s, unit="s", tz="UTC") - pd.Timedelta(minutes=5)).isoformat()
    out = tmp_path / "d.json"
    uri = mlflow_settings.mlflow.tracking_uri
    assert main(["diagnose", "--history", str(history), "--at", at, "--registry", uri, "--out", str(out)]) == 0
    assert json.loads(out.read_text())["findings"]


@pytest.mark.slow
def test_team_incidents_csv(tmp_path: Path) -> None:
    run = simulate_scenario(TINY_TEST[0])
    fault = run.faults[run.faults["node"] != ""].iloc[0]
    csv = tmp_path / "incidents.csv"
    at = (fault["start"] + pd.Timedelta(minutes=20)).isoformat()
    csv.write_text(f"time,scope,cause\n{at},node={fault['node']},{fault['cause']}\n{at},cluster,healthy\n")
    rows = incident_windows(to_long_frame(run), read_incidents(csv))
    assert (rows["label"] == fault["cause"]).sum() == 1 and (rows["label"] == "healthy").sum() >= 2
    bad = tmp_path / "bad.csv"
    bad.write_text(f"time,scope,cause\n{at},node=x,overheating\n")
    with pytest.raises(InputError, match="row 2: unknown cause 'overheating'"):
        read_incidents(bad)


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ("yesterday,node=n1,gpu_thermal,", "row 3: time 'yesterday' is not an ISO 8601 time"),
        (",node=n1,gpu_thermal,", "row 3: time '' is not an ISO 8601 time"),
        ("2300-01-01T00:00:00Z,node=n1,gpu_thermal,", "row 3: time 2300-01-01T00:00:00+00:00 is outside"),
        ("2026-03-02T10:15:00Z,node=n1,gpu_thermal,-5m", "row 3: window '-5m' is not a duration"),
    ],
)
def test_a_bad_incident_time_or_window_names_the_file_and_row(tmp_path: Path, row: str, says: str) -> None:
    csv = tmp_path / "incidents.csv"
    csv.write_text(f"time,scope,cause,window\n2026-03-02T10:00:00Z,node=n1,gpu_oom,15m\n{row}\n")
    with pytest.raises(InputError) as info:
        read_incidents(csv)
    assert str(info.value).startswith(f"{csv}: {says}") and "\n" not in str(info.value)


def test_incident_times_read_as_every_time_flag_reads_them(tmp_path: Path) -> None:
    csv = tmp_path / "incidents.csv"
    csv.write_text("time,scope,cause\n1772446500,node=n1,gpu_oom\n2026-03-02 10:15,cluster,healthy\n")
    times = read_incidents(csv)["time"].tolist()  # Unix seconds and naive ISO 8601 (UTC), as --at takes them
    assert times == [pd.Timestamp("2026-03-02T10:15:00Z")] * 2


def test_incidents_default_to_the_mounted_file_and_a_named_missing_one_is_an_error(tmp_path: Path) -> None:
    mounted = tmp_path / "incidents.csv"
    assert resolve_incidents(None, default=mounted) is None  # no mounted file: simulator data only
    assert resolve_incidents(mounted, default=mounted) is None  # the mount path named, nothing mounted
    mounted.write_text("time,scope,cause\n")
    assert resolve_incidents(None, default=mounted) == mounted
    with pytest.raises(InputError, match=r"--incidents .*nope\.csv: no such file") as info:
        resolve_incidents(tmp_path / "nope.csv", default=mounted)
    assert "\n" not in str(info.value)


def test_cli_names_a_missing_incidents_file_in_one_line(
    mlflow_settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", "rca", "--quick", "--no-register", "--incidents", str(tmp_path / "gone.csv")]) == 1
    err = capsys.readouterr().err.strip()
    assert "gone.csv: no such file" in err and len(err.splitlines()) == 1


@pytest.mark.slow
def test_incident_windows_are_read_from_the_source_around_each_incident(tmp_path: Path) -> None:
    run = simulate_scenario(TINY_TEST[0])
    history = tmp_path / "h.parquet"
    to_long_frame(run).to_parquet(history)
    fault = run.faults[run.faults["node"] != ""].iloc[0]
    at = (fault["start"] + pd.Timedelta(minutes=20)).isoformat()
    late = (pd.Timestamp(run.grid.end_s, unit="s", tz="UTC") + pd.Timedelta(days=30)).isoformat()
    csv = tmp_path / "incidents.csv"
    csv.write_text(f"time,scope,cause\n{at},node={fault['node']},{fault['cause']}\n{late},cluster,healthy\n")
    got = incident_rows(csv, source=FileSource(history))
    assert got.incidents == 1  # the second is after the history ends: nothing to learn from
    assert list(got.rows["label"]) == [fault["cause"]] and set(got.rows["node"]) == {fault["node"]}
