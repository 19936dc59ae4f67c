"""A registered ``gpu-demand`` version in our format, with a valid digest, whose trees would crash ``predict``.

The digest proves the files are the ones registered, not that their writer was honest: a registry writer
can register crafted state files and their true digest. The loop must refuse the version in one line
naming it, keep serving the last good champion, and never reach the compiled code the crafted arrays
would have crashed (a child index past the node array is a segmentation fault in scikit-learn's predict).
Optional signing (``mlflow.signing_key_file``): a version without a valid HMAC tag is refused, however
valid its digest.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from safetensors.numpy import load_file, save_file

from models.demand_eval import RunDemandModel
from models.demand_features import EARLY_FEATURES, HISTORY_FEATURES
from predictor.config import MlflowSettings, Settings
from predictor.errors import ConfigError, ModelRefusedError
from predictor.loop.demand import RegistryDemand
from predictor.registry import CHAMPION, DEMAND_FAMILY, ModelRegistry
from predictor.registry.modeldir import DIGEST_TAG, LOADER_MODULE, STATE_FILES, state_digest, write_state_dir
from predictor.registry.signing import SIGNATURE_TAG, sign
from tests.registry.test_malicious_model import plain_mlflow

NOW = pd.Timestamp("2026-11-12T00:00:00Z")
KEY = b"k" * 32


@pytest.fixture(scope="module")
def fitted() -> RunDemandModel:
    rng = np.random.default_rng(0)
    n = 120
    runs = pd.DataFrame({c: rng.normal(size=n) for c in (*HISTORY_FEATURES, *EARLY_FEATURES)})
    runs["y_used_frac"] = np.clip(0.5 + 0.1 * runs["gpu_request"] + rng.normal(0, 0.1, n), 0, 1)
    runs["y_mem_frac"] = np.clip(0.4 + rng.normal(0, 0.1, n), 0, 1)
    return RunDemandModel(max_iter=5).fit(runs)


def crafted_state(model: RunDemandModel, directory: Path) -> str:
    """``model``'s state files with the first tree's root pointing past its nodes; their (valid) digest."""
    write_state_dir(model, "tabular", directory)
    document = json.loads((directory / STATE_FILES[0]).read_text())
    arrays = load_file(str(directory / STATE_FILES[1]))
    ref = _first_records(document["state"])
    nodes = arrays[ref].reshape(-1).view(model.models_.gpus.model_._predictors[0][0].nodes.dtype)
    nodes[0]["left"] = 10**6
    save_file(arrays, str(directory / STATE_FILES[1]))
    return state_digest(directory)


def _first_records(node: object) -> str:
    if isinstance(node, dict):
        if node.get("$") == "records":
            return str(node["ref"])
        node = list(node.values())
    for child in node if isinstance(node, list) else []:
        try:
            return _first_records(child)
        except LookupError:
            continue
    raise LookupError("no record array")


def register_crafted(settings: Settings, model: RunDemandModel, tmp_path: Path, signature: str | None = None) -> str:
    """Registered as any registry writer could (plain MLflow), with the files' true digest, made champion."""
    state = tmp_path / "crafted" / "state"
    digest = crafted_state(model, state)
    with plain_mlflow(settings) as mlflow:
        with mlflow.start_run():
            info = mlflow.pyfunc.log_model(
                name="model", loader_module=LOADER_MODULE, data_path=str(state), pip_requirements=["mlflow"]
            )
        tags = {DIGEST_TAG: digest}
        if signature is not None:
            tags[SIGNATURE_TAG] = signature
        version = str(mlflow.register_model(info.model_uri, DEMAND_FAMILY, tags=tags).version)
        mlflow.MlflowClient().set_registered_model_alias(DEMAND_FAMILY, CHAMPION, version)
    return version


class NoJobs:
    def pending(self, now: pd.Timestamp) -> pd.DataFrame:
        return pd.DataFrame({"series_id": pd.Series(dtype=str), "timestamp": pd.Series(dtype=object), "value": 0.0})


def _history() -> pd.DataFrame:
    return pd.DataFrame({"series_id": ["team-a"], "timestamp": [NOW], "value": [3.0]})


def test_a_crafted_demand_champion_with_a_valid_digest_is_refused_and_the_last_good_one_kept(
    mlflow_tracking: Settings, fitted: RunDemandModel, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = ModelRegistry(mlflow_tracking.mlflow)
    writer.promote(DEMAND_FAMILY, writer.log_model(DEMAND_FAMILY, fitted, kind="tabular").version)
    serving = ModelRegistry(mlflow_tracking.mlflow)  # the loop's registry: it serves the good champion first
    demand = RegistryDemand(serving, NoJobs())
    assert demand.demand(_history(), NOW).versions == {DEMAND_FAMILY: "1"}
    last_good = serving.load(DEMAND_FAMILY)

    version = register_crafted(mlflow_tracking, fitted, tmp_path)
    assert version == "2"

    # a process without a good model: one line naming the version and the refused array
    with pytest.raises(ModelRefusedError) as refused:
        ModelRegistry(mlflow_tracking.mlflow).load(DEMAND_FAMILY)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"cannot load models:/{DEMAND_FAMILY}@champion (models:/{DEMAND_FAMILY}/2) from ")
    array = "estimator.models_.gpus.model_._predictors[0][0].nodes[0].left"
    assert f": v2: malformed state: {array}: child 1000000 of node 0 is outside" in message

    # the loop keeps serving version 1, says why, and its predictions are those of version 1
    with caplog.at_level(logging.WARNING, logger="predictor.registry.store"):
        assert demand.demand(_history(), NOW).versions == {DEMAND_FAMILY: "1"}
        assert serving.load(DEMAND_FAMILY) is last_good
    assert f"(models:/{DEMAND_FAMILY}/2) from " in caplog.text and array in caplog.text
    assert "keeping the last good model" in caplog.text
    rows = pd.DataFrame(np.zeros((2, len(fitted.models_.gpus.empty_features_))))
    np.testing.assert_array_equal(last_good.estimator.models_.gpus.predict(rows), fitted.models_.gpus.predict(rows))


def _signed(settings: Settings, key_file: Path) -> Settings:
    key_file.write_bytes(KEY + b"\n")
    return Settings(mlflow=MlflowSettings(tracking_uri=settings.mlflow.tracking_uri, signing_key_file=key_file))


def test_with_a_signing_key_a_signed_version_loads_and_an_unsigned_one_is_refused(
    mlflow_tracking: Settings, fitted: RunDemandModel, tmp_path: Path
) -> None:
    signed = _signed(mlflow_tracking, tmp_path / "signing.key")
    writer = ModelRegistry(signed.mlflow)  # a training job holding the key
    writer.promote(DEMAND_FAMILY, writer.log_model(DEMAND_FAMILY, fitted, kind="tabular").version)
    served = ModelRegistry(signed.mlflow).load(DEMAND_FAMILY)
    assert served.version == "1" and type(served.estimator) is RunDemandModel

    # a registry writer without the key: intact state files, a true digest, no valid signature
    unkeyed = ModelRegistry(mlflow_tracking.mlflow)
    unkeyed.promote(DEMAND_FAMILY, unkeyed.log_model(DEMAND_FAMILY, fitted, kind="tabular").version)
    with pytest.raises(
        ModelRefusedError, match=rf"\(models:/{DEMAND_FAMILY}/2\) from .*: v2 has no {SIGNATURE_TAG} tag"
    ):
        ModelRegistry(signed.mlflow).load(DEMAND_FAMILY)
    assert unkeyed.load(DEMAND_FAMILY).version == "2"  # without a key configured, the digest is all that is checked


def test_a_forged_or_replayed_signature_is_refused(
    mlflow_tracking: Settings, fitted: RunDemandModel, tmp_path: Path
) -> None:
    signed = _signed(mlflow_tracking, tmp_path / "signing.key")
    # a tag made with another key over the crafted files' true digest
    digest = crafted_state(fitted, tmp_path / "probe" / "state")
    register_crafted(mlflow_tracking, fitted, tmp_path, signature=sign(b"x" * 32, DEMAND_FAMILY, "1", digest))
    with pytest.raises(
        ModelRefusedError, match=rf"\(models:/{DEMAND_FAMILY}/1\) from .*: v1: its {SIGNATURE_TAG} tag was not made"
    ):
        ModelRegistry(signed.mlflow).load(DEMAND_FAMILY)
    # the right key's tag, but for another version: a signature does not move between versions
    register_crafted(mlflow_tracking, fitted, tmp_path / "again", signature=sign(KEY, DEMAND_FAMILY, "1", digest))
    with pytest.raises(
        ModelRefusedError, match=rf"\(models:/{DEMAND_FAMILY}/2\) from .*: v2: its {SIGNATURE_TAG} tag was not made"
    ):
        ModelRegistry(signed.mlflow).load(DEMAND_FAMILY)


def test_a_short_or_missing_signing_key_is_a_configuration_error(mlflow_tracking: Settings, tmp_path: Path) -> None:
    (tmp_path / "short.key").write_bytes(b"too short\n")
    for path, why in ((tmp_path / "short.key", "the key has 9 bytes, at least 32"), (tmp_path / "none", "cannot read")):
        settings = MlflowSettings(tracking_uri=mlflow_tracking.mlflow.tracking_uri, signing_key_file=path)
        with pytest.raises(ConfigError, match=f"mlflow.signing_key_file {path}: {why}"):
            ModelRegistry(settings)
