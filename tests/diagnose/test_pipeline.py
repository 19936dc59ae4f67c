"""``predictor train rca`` on a real MLflow store: register, champion/challenger gate, load by alias."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pipelines.rca import RcaJob, train_rca
from pipelines.rca_data import Scenario, incident_windows, read_incidents, simulate_scenario, to_long_frame
from predictor.cli import main
from predictor.config import Settings
from predictor.diagnose.models import FAMILY, load_registry
from predictor.errors import InputError
from predictor.registry import CHAMPION, ModelRegistry

TINY_TRAIN = (Scenario(seed=31, nodes=4, fault_rate_per_day=90, days=0.3),)
TINY_TEST = (Scenario(seed=32, nodes=4, fault_rate_per_day=90, days=0.3),)


@pytest.mark.slow
def test_train_register_gate_and_serve(mlflow_settings: Settings, tmp_path: Path, rca_cache: Path) -> None:
    job = RcaJob(
        cache_dir=rca_cache, train_scenarios=TINY_TRAIN, heldout_scenarios=TINY_TEST, save=tmp_path / "rca.json"
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

    served = load_registry(mlflow_settings.mlflow)
    rows = pd.DataFrame([[0.0] * served.n_features_in_], columns=served.feature_names_in_)
    assert served.predict(rows)[0] in set(served.classes_)


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
