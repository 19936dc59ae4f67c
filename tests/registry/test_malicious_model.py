"""A registry writer must not run code in the loop. Refused, nothing executed, last good model kept."""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from models.forecast import NaiveForecaster
from predictor.config import Settings
from predictor.errors import RegistryError
from predictor.registry import CHAMPION, ModelRegistry
from predictor.registry.modeldir import DIGEST_TAG

FAMILY = "gpu-forecast"


@contextlib.contextmanager
def plain_mlflow(settings: Settings) -> Iterator[Any]:
    """mlflow itself, used the way any registry writer could, outside our wrapper."""
    import mlflow

    previous = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    mlflow.set_tracking_uri(settings.mlflow.tracking_uri)
    mlflow.set_registry_uri(settings.mlflow.tracking_uri)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # MLflow's advice about input examples
            yield mlflow
    finally:
        mlflow.set_tracking_uri(previous[0])
        mlflow.set_registry_uri(previous[1])


def register_payload(settings: Settings, marker: Path) -> str:
    """A pyfunc whose pickle writes ``marker`` when unpickled, registered and aliased ``champion``."""
    with plain_mlflow(settings) as mlflow:

        class Payload(mlflow.pyfunc.PythonModel):  # type: ignore[misc,name-defined]
            def __reduce__(self) -> Any:
                return (exec, (f"open({str(marker)!r}, 'w').write('payload ran')",))

            def predict(self, context: Any, model_input: list[str], params: Any = None) -> list[str]:
                return model_input

        with mlflow.start_run():
            info = mlflow.pyfunc.log_model(
                name="model", python_model=Payload(), pip_requirements=["mlflow"], registered_model_name=FAMILY
            )
        version = str(info.registered_model_version)
        client = mlflow.MlflowClient()
        client.set_model_version_tag(FAMILY, version, DIGEST_TAG, "0" * 64)  # a tag alone proves nothing
        client.set_registered_model_alias(FAMILY, CHAMPION, version)
    return version


@pytest.fixture
def good(mlflow_tracking: Settings, daily_history: pd.DataFrame) -> NaiveForecaster:
    model = NaiveForecaster().fit(daily_history)
    registry = ModelRegistry(mlflow_tracking.mlflow)
    registry.promote(FAMILY, registry.log_model(FAMILY, model).version)
    return model


@pytest.mark.slow
def test_a_pickled_champion_is_refused_and_never_unpickled(
    mlflow_tracking: Settings, good: NaiveForecaster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    marker = tmp_path / "payload-ran"
    serving = ModelRegistry(mlflow_tracking.mlflow)
    last_good = serving.load_estimator(FAMILY)  # the loop loaded the good champion before

    version = register_payload(mlflow_tracking, marker)
    assert ModelRegistry(mlflow_tracking.mlflow).get(FAMILY).version == version  # type: ignore[union-attr]

    # a process with no good model yet: refused, naming why
    with pytest.raises(
        RegistryError,
        match=rf"cannot load models:/{FAMILY}@champion .*: v{version} is not a model "
        r"of this project \(a pickled python_model.*nothing was unpickled",
    ):
        ModelRegistry(mlflow_tracking.mlflow).load_estimator(FAMILY)
    assert not marker.exists()

    # the serving process keeps its last good model and says why
    with caplog.at_level(logging.WARNING, logger="predictor.registry.store"):
        assert serving.load_estimator(FAMILY) is last_good
    assert "pickled python_model" in caplog.text and "keeping the last good model" in caplog.text
    assert not marker.exists()
    pd.testing.assert_frame_equal(last_good.predict(24), good.predict(24))

    # the payload is live: MLflow's own loader runs it (which is why the registry never calls it)
    with plain_mlflow(mlflow_tracking) as mlflow, contextlib.suppress(Exception):
        mlflow.pyfunc.load_model(f"models:/{FAMILY}/{version}")
    assert marker.read_text() == "payload ran"


def _state_files(root: Path) -> list[Path]:
    return sorted(root.rglob("data/state/arrays.safetensors"))


def test_a_tampered_state_file_is_refused(mlflow_tracking: Settings, good: NaiveForecaster, tmp_path: Path) -> None:
    serving = ModelRegistry(mlflow_tracking.mlflow)
    last_good = serving.load_estimator(FAMILY)
    (arrays,) = _state_files(tmp_path / "mlruns")
    data = bytearray(arrays.read_bytes())
    data[-1] ^= 0x01  # one bit of one stored value
    arrays.write_bytes(bytes(data))

    with pytest.raises(RegistryError, match="do not match the digest recorded at registration"):
        ModelRegistry(mlflow_tracking.mlflow).load_estimator(FAMILY)
    assert serving.load_estimator(FAMILY) is last_good


def test_a_version_without_a_digest_is_refused(mlflow_tracking: Settings, good: NaiveForecaster) -> None:
    with plain_mlflow(mlflow_tracking) as mlflow:
        mlflow.MlflowClient().delete_model_version_tag(FAMILY, "1", DIGEST_TAG)
    with pytest.raises(RegistryError, match=f"v1 has no {DIGEST_TAG} tag"):
        ModelRegistry(mlflow_tracking.mlflow).load_estimator(FAMILY)


def test_an_extra_file_in_the_state_directory_is_refused(
    mlflow_tracking: Settings, good: NaiveForecaster, tmp_path: Path
) -> None:
    (arrays,) = _state_files(tmp_path / "mlruns")
    (arrays.parent / "python_model.pkl").write_bytes(b"\x80\x04.")
    with pytest.raises(RegistryError, match="expected exactly the plain files"):
        ModelRegistry(mlflow_tracking.mlflow).load_estimator(FAMILY)
