"""Settings for every command: built once in the CLI from a YAML file and ``PREDICTOR_…`` variables.

Precedence (highest first): environment variables, the YAML file given with ``--config``, defaults.
Nested fields use ``__`` in variable names: ``PREDICTOR_PROMETHEUS__URL``. Secrets are never taken from
argv: a bearer token comes from ``PREDICTOR_PROMETHEUS__BEARER_TOKEN`` or a file named by
``bearer_token_file`` (as a Kubernetes service-account token is mounted). One concept, one key: a key
that moved (``loop.stale_after_s`` → ``planner.stale_after_s``) still loads under its old name, with a
``DeprecatedSettingWarning`` that the CLI prints as one line.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from predictor.config.actuators import (
    ActuatorSettings,
    NotifySettings,
    QueueActuatorSettings,
    XdpActuatorSettings,
)
from predictor.config.deprecation import DeprecatedSettingWarning
from predictor.config.diagnose import DiagnoseLoopSettings
from predictor.errors import ConfigError
from predictor.names import DNS1123_LABEL, DNS1123_LABEL_MAX, LABEL_NAME, anchored
from predictor.planner.settings import PlannerSettings
from predictor.userfiles import first_problem, read_structured

__all__ = [
    "ActuatorSettings",
    "ClusterSettings",
    "DeprecatedSettingWarning",
    "DiagnoseLoopSettings",
    "LoopSettings",
    "MlflowSettings",
    "NotifySettings",
    "PlannerSettings",
    "PrometheusSettings",
    "QueueActuatorSettings",
    "Settings",
    "XdpActuatorSettings",
    "load_settings",
]


class PrometheusSettings(BaseModel):
    """How to reach a Prometheus-compatible HTTP API (Prometheus, Thanos, Mimir, VictoriaMetrics)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field("http://127.0.0.1:9090", description="Base URL of the Prometheus HTTP API.")
    bearer_token: SecretStr | None = Field(None, description="Bearer token; prefer the environment.")
    bearer_token_file: Path | None = Field(None, description="File holding the bearer token.")
    basic_auth_user: str | None = Field(None, description="Basic-auth user name.")
    basic_auth_password: SecretStr | None = Field(None, description="Basic-auth password.")
    headers: dict[str, str] = Field(
        default_factory=dict, description="Extra request headers, e.g. X-Scope-OrgID for Mimir tenants."
    )
    verify_tls: bool = Field(True, description="Verify the server certificate (on by default).")
    ca_file: Path | None = Field(None, description="CA bundle used to verify the server certificate.")
    timeout_s: float = Field(30.0, gt=0, le=600, description="Per-request timeout in seconds.")
    retries: int = Field(3, ge=0, le=20, description="Retries of a transient failure before giving up.")
    backoff_s: float = Field(0.5, ge=0, le=60, description="First backoff delay; doubles each retry.")
    max_points_per_request: int = Field(
        11_000, ge=2, le=11_000, description="Most points per series one range request may ask for."
    )
    cluster_label: str = Field(
        "cluster",
        pattern=anchored(LABEL_NAME),
        description="Label naming the cluster in a central store (Prometheus external_labels, Thanos, Mimir).",
    )

    @model_validator(mode="after")
    def _one_auth_method(self) -> PrometheusSettings:
        if (self.bearer_token or self.bearer_token_file) and self.basic_auth_user:
            raise ValueError("use either a bearer token or basic auth, not both")
        if self.basic_auth_user and self.basic_auth_password is None:
            raise ValueError("basic_auth_user is set but basic_auth_password is missing")
        return self

    def resolved_bearer_token(self) -> str | None:
        """The bearer token from the setting or its file (read on each call, so rotation is honoured)."""
        if self.bearer_token is not None:
            return self.bearer_token.get_secret_value()
        if self.bearer_token_file is not None:
            try:
                return self.bearer_token_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(f"cannot read bearer_token_file {self.bearer_token_file}: {exc}") from exc
        return None


class MlflowSettings(BaseModel):
    """Where models are tracked and registered."""

    model_config = ConfigDict(extra="forbid")

    tracking_uri: str = Field(
        default_factory=lambda: f"sqlite:///{Path.cwd() / 'mlflow.db'}",
        description="MLflow tracking URI; a local sqlite file by default.",
    )
    registry_uri: str | None = Field(None, description="Model registry URI if not the tracking URI.")
    experiment: str = Field("gpu-capacity-predictor", description="Experiment that training runs log to.")
    artifact_location: str | None = Field(
        None,
        description="Artifact root given to the experiment when it is created (a URI or path); default: "
        "MLflow's, which for a sqlite store is ./mlruns under the working directory.",
    )
    promotion_margin: float = Field(
        0.0, ge=0, le=1, description="Relative backtest improvement a challenger needs to become champion."
    )
    signing_key_file: Path | None = Field(
        None,
        description="File holding a shared secret (at least 32 bytes) that signs registered models. When set, "
        "training jobs tag each new version with an HMAC-SHA256 of its family, version and state digest, and "
        "serving refuses any version whose tag does not verify. The digest alone lives in the registry and "
        "proves integrity only; the key lives outside it, so a registry writer without the key cannot forge a "
        "model the loop will load. Mount it read-only from a Secret in the loop and the training jobs.",
    )
    http_timeout_s: int = Field(
        30, ge=1, le=600, description="Seconds one HTTP request to a remote MLflow may take (MLflow's own: 120)."
    )
    http_retries: int = Field(
        2, ge=0, le=10, description="Retries of a failed HTTP request to a remote MLflow (MLflow's own: 7)."
    )
    http_backoff_s: int = Field(
        1, ge=0, le=30, description="Backoff factor between those retries, doubling (MLflow's own: 2)."
    )
    # The promotion gate (predictor.registry.promotion): a challenger fitted on newer data replaces a champion
    # it does not beat when it is not worse by more than the tolerance; a champion older than the maximum age
    # is replaced by any challenger not worse than it.
    promotion_tolerance: float = Field(
        0.05, ge=0, le=1, description="Relative score a challenger on newer data may lose and still be promoted."
    )
    max_champion_age_days: float = Field(
        30.0, gt=0, description="Days after which a champion is replaced by a not-worse challenger (and alerts)."
    )


class XdpLoopSettings(BaseModel):
    """What the loop publishes for the XDP node agents (``predictor.loop.xdp``); off unless enabled."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(False, description="Forecast each node's network load and publish XDP agent inputs.")
    targets: list[str] = Field(
        default_factory=list,
        description="Steering target interfaces, the same on every node (what `predictor xdp load --targets` loaded).",
    )
    capacity_bps: float = Field(
        25e9, gt=0, allow_inf_nan=False, description="Link capacity of each target, bits per second."
    )
    node_label: str = Field(
        "node", pattern=anchored(LABEL_NAME), description="Label naming the node on node_exporter series."
    )
    exclude_devices: str = Field(
        "lo|veth.*|cali.*|cilium.*|flannel.*|cni.*|docker.*|tunl.*|vxlan.*",
        min_length=1,
        description="Regex of node_exporter devices that never carry steered traffic.",
    )
    lookback_h: float = Field(
        8 * 24, ge=24, le=60 * 24, description="Network history read each cycle (the forecaster uses the last 7 days)."
    )
    configmap: str = Field(
        "predictor-xdp-inputs",
        min_length=1,
        max_length=253,
        description="ConfigMap the agents mount; the loop gets and patches it by name only.",
    )
    namespace: str = Field(
        "gpu-capacity-predictor-node",
        min_length=1,
        max_length=63,
        description="Namespace of the ConfigMap (the node agents' own).",
    )

    @model_validator(mode="after")
    def _targets_when_enabled(self) -> XdpLoopSettings:
        if self.enabled and not self.targets:
            raise ValueError("loop.xdp.targets must name the steering interfaces when loop.xdp.enabled is true")
        if len(set(self.targets)) != len(self.targets):
            raise ValueError("loop.xdp.targets names an interface twice")
        return self


class LoopSettings(BaseModel):
    """The scheduling loop's cadence and endpoint (its staleness threshold is ``planner.stale_after_s``)."""

    model_config = ConfigDict(extra="forbid")

    interval_s: float = Field(3600.0, gt=0, description="Seconds between loop cycles.")
    metrics_port: int = Field(9108, ge=0, le=65535, description="Port of the loop's /metrics endpoint.")
    metrics_address: str = Field(
        "0.0.0.0",  # noqa: S104 - the loop pod's own network namespace; k8s/ NetworkPolicies limit who scrapes
        min_length=1,
        description="Address the loop's /metrics, /ready and /healthz listen on (127.0.0.1: this host only).",
    )

    lease_name: str = Field(
        "gpu-capacity-predictor-loop",
        min_length=1,
        max_length=253,
        description="coordination.k8s.io Lease that elects the one loop allowed to act in server-dry-run and "
        "apply modes (the RBAC grants get/update on this name only).",
    )
    lease_namespace: str = Field(
        "gpu-capacity-predictor",
        min_length=1,
        max_length=63,
        description="Namespace of the leader Lease (the loop's own).",
    )
    xdp: XdpLoopSettings = Field(default_factory=XdpLoopSettings)  # type: ignore[arg-type]
    diagnose: DiagnoseLoopSettings = Field(default_factory=DiagnoseLoopSettings)  # type: ignore[arg-type]
    lease_duration_s: float = Field(
        60.0,
        ge=5,
        le=3600,
        description="leaseDurationSeconds: how long a standby loop must see the Lease unchanged, by its own "
        "clock, before it takes it (clock skew between pods does not matter). The holder renews it every cycle "
        "and every loop.lease_renew_s while it waits, so a dead loop is replaced within this time plus one "
        "interval. At least 3 × loop.lease_renew_s, so one late renewal never hands the Lease over.",
    )
    lease_renew_s: float = Field(
        20.0,
        ge=1,
        le=1200,
        description="How often the holder renews the Lease while it waits for the next cycle.",
    )
    react_poll_s: float = Field(
        60.0,
        ge=1,
        le=3600,
        description="With planner.react_pending_gpus > 0: how often the leader reads queues and pending GPUs "
        "while it waits for the next interval slot, and re-plans at once when a queue has waited beyond its "
        "deserved for planner.react_after_s (predictor.loop.react). Unused while react_pending_gpus is 0.",
    )

    healthy_within_intervals: float = Field(
        5.0,
        ge=2,
        le=100,
        description="/healthz fails (and the kubelet restarts the loop) when no cycle has completed, "
        "successfully or not, for this many intervals: a hung cycle, not a failing one.",
    )

    @model_validator(mode="after")
    def _lease_outlives_renewals(self) -> LoopSettings:
        if self.lease_duration_s < 3 * self.lease_renew_s:
            raise ValueError(
                f"lease_duration_s ({self.lease_duration_s:g}) must be at least 3 × lease_renew_s "
                f"({self.lease_renew_s:g} s): a Lease shorter than three renewals is handed over on one late renewal"
            )
        return self

    @property
    def live_within_s(self) -> float:
        """``/healthz`` holds while the last completed cycle (or the start) is younger than this."""
        return self.healthy_within_intervals * self.interval_s

    @property
    def ready_within_s(self) -> float:
        """``/ready`` holds while the last successful cycle is younger than this: three intervals, so one
        failed or slow cycle does not take the loop out of service."""
        return 3 * self.interval_s


class ClusterSettings(BaseModel):
    """One cluster of a fleet: where its metrics are and which Kubernetes API it is planned against.

    Metrics come from the cluster's own Prometheus (``prometheus``) or, when that is not given, from the
    top-level ``prometheus`` (a central store: Thanos, Mimir, a Prometheus receiving remote-write) with
    every selector narrowed to ``{<prometheus.cluster_label>="<label_value>"}``.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        ...,
        pattern=anchored(DNS1123_LABEL),
        max_length=DNS1123_LABEL_MAX,
        description="Cluster name (a DNS label): qualifies series, plans, audit records and metrics.",
    )
    label_value: str | None = Field(
        None, min_length=1, description="Value of the cluster label in the central store (default: name)."
    )
    prometheus: PrometheusSettings | None = Field(
        None, description="The cluster's own Prometheus; unset: the central store in the top-level section."
    )
    kube_context: str | None = Field(None, min_length=1, description="kubeconfig context of this cluster's API.")
    kubeconfig: Path | None = Field(None, description="kubeconfig file (default: in-cluster, then ~/.kube/config).")

    @property
    def selector_value(self) -> str:
        """What the central store's cluster label holds for this cluster."""
        return self.label_value or self.name


# Old (section, key) → new (section, key). Old names keep working so existing settings files and
# PREDICTOR_… variables still load; the new key wins when both are given.
_MOVED_KEYS = {("loop", "stale_after_s"): ("planner", "stale_after_s")}


def _move_deprecated_keys(data: dict[str, Any]) -> dict[str, Any]:
    data = dict(data)
    for (old_section, old_key), (new_section, new_key) in _MOVED_KEYS.items():
        section = data.get(old_section)
        if not isinstance(section, Mapping) or old_key not in section:
            continue
        section = dict(section)
        value = section.pop(old_key)
        data[old_section] = section
        target = data.get(new_section) or {}
        if isinstance(target, BaseModel):
            target = target.model_dump(exclude_unset=True)
        if isinstance(target, Mapping):
            data[new_section] = {new_key: value, **target}
        warnings.warn(
            f"settings key {old_section}.{old_key} is deprecated: use {new_section}.{new_key}",
            DeprecatedSettingWarning,
            stacklevel=2,
        )
    return data


class Settings(BaseSettings):
    """Every setting of the project. Build once (``load_settings``) and pass down."""

    model_config = SettingsConfigDict(
        env_prefix="PREDICTOR_", env_nested_delimiter="__", extra="forbid", case_sensitive=False
    )

    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)  # type: ignore[arg-type]
    mlflow: MlflowSettings = Field(default_factory=MlflowSettings)  # type: ignore[arg-type]
    actuators: ActuatorSettings = Field(default_factory=ActuatorSettings)  # type: ignore[arg-type]
    loop: LoopSettings = Field(default_factory=LoopSettings)  # type: ignore[arg-type]
    planner: PlannerSettings = Field(default_factory=PlannerSettings)  # type: ignore[arg-type]
    clusters: list[ClusterSettings] = Field(
        default_factory=list,
        description="The fleet. Empty: one cluster, today's single Prometheus and Kubernetes API, series named "
        "by queue alone. Given: every series, plan, audit record, report row and metric carries its cluster.",
    )

    @model_validator(mode="before")
    @classmethod
    def _deprecated_keys(cls, data: Any) -> Any:
        return _move_deprecated_keys(data) if isinstance(data, dict) else data

    @model_validator(mode="after")
    def _cluster_names_unique(self) -> Settings:
        names = [cluster.name for cluster in self.clusters]
        if len(set(names)) != len(names):
            twice = sorted({name for name in names if names.count(name) > 1})
            raise ValueError(f"cluster name {', '.join(twice)} listed more than once")
        # Two clusters read from the central store under one label value would both read the same series.
        central: dict[str, str] = {}
        for cluster in self.clusters:
            if cluster.prometheus is None:
                other = central.setdefault(cluster.selector_value, cluster.name)
                if other != cluster.name:
                    raise ValueError(
                        f"clusters {other} and {cluster.name} both read "
                        f'{self.prometheus.cluster_label}="{cluster.selector_value}" '
                        "from the central store (set label_value)"
                    )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment wins over the YAML file, which arrives as init kwargs (see load_settings).
        return (env_settings, init_settings, file_secret_settings)


def _read_yaml(path: Path) -> dict[str, Any]:
    data = read_structured(path, "config file", ConfigError)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    return data


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Settings from defaults, an optional YAML file and ``PREDICTOR_…`` variables, then ``overrides``.

    ``overrides`` come from explicit CLI flags and are applied last, merged per section:
    ``load_settings(path, prometheus={"url": url})``.
    """
    data = _read_yaml(config_file) if config_file is not None else {}
    try:
        settings = Settings(**data)
        for section, values in overrides.items():
            current = getattr(settings, section)
            # Validate the section alone: re-validating Settings would let the environment win again.
            # Only the keys given explicitly: a deprecated key among ``values`` still fills its new ones.
            updated = type(current).model_validate({**current.model_dump(exclude_unset=True), **values})
            setattr(settings, section, updated)
    except ValidationError as exc:
        where, problem = first_problem(exc, "")
        source = f" in {config_file}" if config_file else ""
        what = f"setting {where}" if where else "settings"  # a check across sections has no field path
        raise ConfigError(f"invalid {what}{source}: {problem}") from exc
    return settings
