"""A small, family-agnostic wrapper over the MLflow tracking store and model registry.

Every model family (``gpu-forecast``, ``gpu-demand``, ``gpu-rca``) goes through the same four steps: log a
run (params, metrics, data window, artifacts, model card) with the model stored as data (``modeldir``:
state files plus a digest, never a pickle), register it, give the new version the ``challenger`` alias,
and move ``champion`` only when the one promotion policy (``promotion``) says so. Serving loads
``models:/<family>@<alias>`` from the configured URIs only, refuses a version that is not in our format or
whose files do not match its recorded digest, and keeps the last model that loaded when a later load fails
(a registry outage, or a refused model, must not take forecasts down with it).

mlflow is imported inside the methods: importing it costs seconds, and most commands never touch it.
Foreign errors are wrapped into ``RegistryError`` here, at the boundary.
"""

from __future__ import annotations

import logging
import tempfile
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from predictor.config import MlflowSettings
from predictor.errors import PredictorError, RegistryError
from predictor.registry.limits import http_limits
from predictor.registry.modeldir import DIGEST_TAG, LOADER_MODULE, STATE_DIR, read_model_dir, write_state_dir
from predictor.registry.served import ServedModel
from predictor.registry.signing import SIGNATURE_TAG, read_key, sign, verify

__all__ = ["CHALLENGER", "CHAMPION", "ModelRegistry", "ModelVersionInfo", "beats"]

log = logging.getLogger(__name__)

CHAMPION = "champion"
CHALLENGER = "challenger"
PROJECT = "gpu-capacity-predictor"
DEFAULT_REQUIREMENTS = ("pandas", "numpy", "scikit-learn", "statsmodels", "torch", "gpu-capacity-predictor")


@dataclass(frozen=True)
class ModelVersionInfo:
    """One registered version and what its run logged."""

    family: str
    version: str
    run_id: str
    aliases: tuple[str, ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    # when the version was registered (Unix seconds; None: not read from a registry) and its run's tags
    # (``promotion``: why it was or was not promoted): what a champion's age and last decision are read from
    created_unix: float | None = None
    tags: dict[str, str] = field(default_factory=dict)


def beats(challenger: float, champion: float, margin: float) -> bool:
    """Lower-is-better comparison: the challenger must improve on the champion by ``margin`` (relative)."""
    return challenger < champion * (1.0 - margin)


def _foreign(exc: BaseException) -> bool:
    """An error raised by the libraries behind the registry (not a bug in our own code)."""
    module = type(exc).__module__.split(".")[0]
    return isinstance(exc, OSError) or module in {"mlflow", "sqlalchemy", "requests", "urllib3", "alembic"}


def _reason(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class ModelRegistry:
    """Logs, registers, aliases and loads models of one MLflow deployment (``settings.mlflow``)."""

    def __init__(self, settings: MlflowSettings) -> None:
        self.settings = settings
        self._last_good: dict[tuple[str, str], ServedModel] = {}
        # read once, at start: a missing or short key is a configuration error, not a refused model
        self._key = read_key(settings.signing_key_file) if settings.signing_key_file is not None else None

    @contextmanager
    def _mlflow(self) -> Iterator[Any]:
        """mlflow with this registry's URIs set, restoring the process-wide ones afterwards."""
        with warnings.catch_warnings():
            # Two warnings are MLflow's own business and say nothing about our use, so they are silenced
            # around our calls only (the test suite turns warnings into errors): importing
            # mlflow.types.responses warns about its own Any type hints, and the 3.17 sqlite store still
            # uses SQLAlchemy 2.1's deprecated ``noload``.
            warnings.filterwarnings("ignore", message=r".*inferred as AnyType.*", category=UserWarning)
            warnings.filterwarnings("ignore", message=r".*noload.*", category=DeprecationWarning)
            # Advice only: we log an explicit signature. (An input example would not help: MLflow 3.17
            # serialises it with a comparison that pandas 3 deprecates, another warning-turned-error.)
            warnings.filterwarnings("ignore", message=r".*An input example was not provided.*", category=UserWarning)
            try:
                import mlflow
            except ImportError as exc:  # pragma: no cover - mlflow is a dependency
                raise RegistryError(f"mlflow is not installed: {exc}") from exc
            previous = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
            mlflow.set_tracking_uri(self.settings.tracking_uri)
            mlflow.set_registry_uri(self.settings.registry_uri or self.settings.tracking_uri)
            try:
                with http_limits(self.settings):
                    yield mlflow
            except PredictorError:
                raise
            except Exception as exc:
                # The foreign boundary: MLflow, SQLAlchemy (a tracking URI naming a file that is not a
                # database), HTTP and OS errors all become one RegistryError naming the store.
                if not _foreign(exc):
                    raise
                raise RegistryError(f"model registry {self.settings.tracking_uri}: {_reason(exc)}") from exc
            finally:
                mlflow.set_tracking_uri(previous[0])
                mlflow.set_registry_uri(previous[1])

    def _client(self, mlflow: Any) -> Any:
        return mlflow.MlflowClient(
            tracking_uri=self.settings.tracking_uri,
            registry_uri=self.settings.registry_uri or self.settings.tracking_uri,
        )

    def _experiment_id(self, mlflow: Any) -> str:
        """The configured experiment, created with the configured artifact root on first use."""
        client = self._client(mlflow)
        experiment = client.get_experiment_by_name(self.settings.experiment)
        if experiment is not None:
            return str(experiment.experiment_id)
        location = self.settings.artifact_location
        if location and "://" not in location:
            location = Path(location).resolve().as_uri()
        return str(client.create_experiment(self.settings.experiment, artifact_location=location))

    def log_model(
        self,
        family: str,
        estimator: Any,
        *,
        kind: str = "forecast",
        params: Mapping[str, Any] | None = None,
        metrics: Mapping[str, float] | None = None,
        tags: Mapping[str, str] | None = None,
        artifacts: Sequence[Path] = (),
        texts: Mapping[str, str] | None = None,
        pip_requirements: Sequence[str] = DEFAULT_REQUIREMENTS,
        input_example: Any = None,
    ) -> ModelVersionInfo:
        """Log one training run with ``estimator`` stored as data, register it and alias it ``challenger``.

        The state files are written (and an estimator the state code cannot store is refused) before
        anything reaches MLflow; their digest is recorded on the run and, atomically, on the new version.
        """
        with tempfile.TemporaryDirectory(prefix="gpu-model-") as tmp:
            state_dir = Path(tmp) / STATE_DIR
            digest = write_state_dir(estimator, kind, state_dir)
            requirements = list(pip_requirements)
            if PROJECT not in requirements:  # the loader module lives in this package
                requirements.append(PROJECT)
            with self._mlflow() as mlflow:
                from mlflow.exceptions import MlflowException
                from mlflow.models import ModelSignature
                from mlflow.types import ColSpec, Schema

                signature = None
                if kind == "forecast":
                    signature = ModelSignature(
                        inputs=Schema([ColSpec("long", "horizon"), ColSpec("string", "levels", required=False)])
                    )
                try:
                    with mlflow.start_run(experiment_id=self._experiment_id(mlflow)) as run:
                        if params:
                            mlflow.log_params({k: str(v)[:500] for k, v in params.items()})
                        if metrics:
                            mlflow.log_metrics({k: float(v) for k, v in metrics.items()})
                        mlflow.set_tags({"family": family, **(tags or {}), DIGEST_TAG: digest})
                        for path in artifacts:
                            mlflow.log_artifact(str(path))
                        for name, text in (texts or {}).items():
                            mlflow.log_text(text, name)
                        # a loader-module pyfunc: MLflow copies the state directory and pickles nothing
                        info = mlflow.pyfunc.log_model(
                            name="model",
                            loader_module=LOADER_MODULE,
                            data_path=str(state_dir),
                            pip_requirements=requirements,  # skips slow requirement inference
                            signature=signature,
                            input_example=input_example,
                        )
                    registered = mlflow.register_model(info.model_uri, family, tags={DIGEST_TAG: digest})
                    version = str(registered.version)
                    if self._key is not None:  # signed before any alias can point at the version
                        tag = sign(self._key, family, version, digest)
                        self._client(mlflow).set_model_version_tag(family, version, SIGNATURE_TAG, tag)
                    self._client(mlflow).set_registered_model_alias(family, CHALLENGER, version)
                except (MlflowException, OSError) as exc:
                    raise RegistryError(f"cannot log {family} to {self.settings.tracking_uri}: {_reason(exc)}") from exc
        return ModelVersionInfo(
            family=family,
            version=version,
            run_id=run.info.run_id,
            aliases=(CHALLENGER,),
            metrics={k: float(v) for k, v in (metrics or {}).items()},
            params={k: str(v) for k, v in (params or {}).items()},
        )

    def get(self, family: str, alias: str = CHAMPION) -> ModelVersionInfo | None:
        """The version holding ``alias`` with its run's params and metrics, or None if none does."""
        with self._mlflow() as mlflow:
            from mlflow.exceptions import MlflowException

            client = self._client(mlflow)
            try:
                mv = client.get_model_version_by_alias(family, alias)
            except MlflowException as exc:
                if "RESOURCE_DOES_NOT_EXIST" in str(exc.error_code) or "not found" in str(exc).lower():
                    return None
                raise RegistryError(f"cannot read {family}@{alias}: {_reason(exc)}") from exc
            try:
                run = client.get_run(mv.run_id)
            except MlflowException as exc:
                raise RegistryError(f"cannot read the run of {family} v{mv.version}: {_reason(exc)}") from exc
            return ModelVersionInfo(
                family=family,
                version=str(mv.version),
                run_id=str(mv.run_id),
                aliases=tuple(mv.aliases),
                metrics=dict(run.data.metrics),
                params=dict(run.data.params),
                created_unix=None if mv.creation_timestamp is None else float(mv.creation_timestamp) / 1000.0,
                tags=dict(run.data.tags),
            )

    def set_alias(self, family: str, alias: str, version: str) -> None:
        with self._mlflow() as mlflow:
            from mlflow.exceptions import MlflowException

            try:
                self._client(mlflow).set_registered_model_alias(family, alias, version)
            except MlflowException as exc:
                raise RegistryError(f"cannot set {family}@{alias} to v{version}: {_reason(exc)}") from exc

    def promote(self, family: str, version: str) -> None:
        """Make ``version`` the champion (the caller has already compared backtests)."""
        self.set_alias(family, CHAMPION, version)

    def load(self, family: str, alias: str = CHAMPION) -> ServedModel:
        """The model at ``models:/<family>@<alias>``, rebuilt from its state files after the format and
        digest checks; on any failure (outage, refusal) the last one that loaded, if any."""
        key = (family, alias)
        uri = f"models:/{family}@{alias}"
        try:
            model = self._fetch(family, alias, uri)
        except RegistryError as exc:
            if key in self._last_good:
                log.warning("loading %s failed (%s); keeping the last good model", uri, exc)
                return self._last_good[key]
            raise
        self._last_good[key] = model
        return model

    def _fetch(self, family: str, alias: str, uri: str) -> ServedModel:
        where = f"cannot load {uri} from {self.settings.tracking_uri}"
        with self._mlflow() as mlflow, tempfile.TemporaryDirectory(prefix="gpu-model-") as tmp:
            try:
                mv = self._client(mlflow).get_model_version_by_alias(family, alias)
                # by version, not alias: the files checked are those of the version whose digest was read
                local = mlflow.artifacts.download_artifacts(artifact_uri=f"models:/{family}/{mv.version}", dst_path=tmp)
            except Exception as exc:  # foreign boundary: MlflowException, OSError, HTTP errors
                raise RegistryError(f"{where}: {_reason(exc)}") from exc
            version = str(mv.version)
            # the alias and the version it resolved to: "v<n>" is what the registry's UI and logs say
            what = f"cannot load {uri} (models:/{family}/{version}) from {self.settings.tracking_uri}: v{version}"
            tags = mv.tags or {}
            key = self._key
            check = None
            if key is not None:

                def check(digest: str) -> None:
                    verify(key, family, version, digest, tags.get(SIGNATURE_TAG), what)

            estimator, kind = read_model_dir(Path(local), tags.get(DIGEST_TAG), what, check)
            return ServedModel(estimator, kind, version=version)

    def load_estimator(self, family: str, alias: str = CHAMPION) -> Any:
        """The estimator of the model at ``alias`` (to refit it, e.g. on a new window)."""
        return self.load(family, alias).estimator
