"""How plans reach the cluster and the kernel: queue writes and modes, the XDP inputs, notifications.

Kept apart from the rest of the settings because it is the one section that decides what the loop may
change: which queues are managed, whether they are recommended or resized, and how writes are sent.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from predictor.config.deprecation import DeprecatedSettingWarning
from predictor.errors import ConfigError
from predictor.planner.selection import ManagedQueues

__all__ = [
    "ActuatorSettings",
    "NotifySettings",
    "QueueActuatorSettings",
    "QueueMode",
    "WriteMode",
    "XdpActuatorSettings",
]

WriteMode = Literal["plan", "server-dry-run", "apply"]
QueueMode = Literal["recommend", "apply"]


class QueueActuatorSettings(BaseModel):
    """Which Volcano queues the loop manages, and what it writes to them."""

    model_config = ConfigDict(extra="forbid")

    writes: WriteMode = Field(
        "plan",
        description="How queue writes reach the API server. plan: plan files only; server-dry-run: every patch "
        "with dryRun=All; apply: real patches.",
    )
    mode: QueueMode = Field(
        "recommend",
        description="What a managed queue gets unless its gpu-capacity-predictor/mode annotation says otherwise. "
        "recommend: the recommendation as annotations, spec untouched; apply: its spec resized.",
    )
    manage: ManagedQueues = Field(
        default_factory=ManagedQueues,  # type: ignore[arg-type]
        description="Which queues are managed (opt-in by annotation and/or label selector; all: true for every one).",
    )


class XdpActuatorSettings(BaseModel):
    """How the XDP node agents' inputs are published, apart from the queues (a queue dry run need not starve
    the agents)."""

    model_config = ConfigDict(extra="forbid")

    mode: WriteMode = Field(
        "plan",
        description="plan: <plan_dir>/xdp/ files only; server-dry-run: ConfigMap patch with dryRun=All; "
        "apply: the agents' ConfigMap patched.",
    )


class NotifySettings(BaseModel):
    """An optional Slack-compatible webhook told about applied changes and holds (``predictor.loop.notify``)."""

    model_config = ConfigDict(extra="forbid")

    webhook_url: SecretStr | None = Field(
        None, description="Incoming-webhook URL (a secret: prefer PREDICTOR_ACTUATORS__NOTIFY__WEBHOOK_URL)."
    )
    webhook_url_file: Path | None = Field(None, description="File holding the webhook URL (a mounted Secret).")
    plan_url: str = Field(
        "",
        description="Link to the plan in each message, with {cycle} and {cluster} filled in, e.g. "
        "https://grafana.example/d/predictor?var-cycle={cycle}; empty: no link.",
    )
    timeout_s: float = Field(5.0, gt=0, le=60, description="Per-request timeout; a failure is logged, never fatal.")
    hold_codes: list[str] = Field(
        default_factory=lambda: ["source_down", "stale_data", "missing_model", "capacity_drop", "invalid_state"],
        description="Hold reason codes worth a message (routine ones such as dead_band and cooldown are not).",
    )

    @model_validator(mode="after")
    def _one_source(self) -> NotifySettings:
        if self.webhook_url is not None and self.webhook_url_file is not None:
            raise ValueError("use either webhook_url or webhook_url_file, not both")
        return self

    def resolved_url(self) -> str | None:
        """The webhook URL from the setting or its file (read on each call, so rotation is honoured)."""
        if self.webhook_url is not None:
            return self.webhook_url.get_secret_value().strip() or None
        if self.webhook_url_file is not None:
            try:
                return self.webhook_url_file.read_text(encoding="utf-8").strip() or None
            except OSError as exc:
                raise ConfigError(f"cannot read webhook_url_file {self.webhook_url_file}: {exc}") from exc
        return None


class ActuatorSettings(BaseModel):
    """How plans reach the cluster and the kernel. Safe by default: plan files only.

    ``mode`` (plan | server-dry-run | apply) is the deprecated single switch for queues and XDP together:
    it still loads, as ``queues.writes`` and ``xdp.mode`` with ``queues.mode: apply`` (what it meant).
    """

    model_config = ConfigDict(extra="forbid")

    queues: QueueActuatorSettings = Field(default_factory=QueueActuatorSettings)  # type: ignore[arg-type]
    xdp: XdpActuatorSettings = Field(default_factory=XdpActuatorSettings)  # type: ignore[arg-type]
    notify: NotifySettings = Field(default_factory=NotifySettings)  # type: ignore[arg-type]
    plan_dir: Path = Field(Path("plans"), description="Directory for plan files.")
    audit_log: Path = Field(Path("audit.jsonl"), description="Append-only JSON-lines audit log.")
    xdp_pin_dir: Path = Field(Path("/sys/fs/bpf/gpu-capacity-predictor"), description="bpffs pin dir.")

    @model_validator(mode="before")
    @classmethod
    def _deprecated_mode(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or "mode" not in data:
            return data
        data = dict(data)
        mode = data.pop("mode")
        queues = _as_dict(data.get("queues"))
        xdp = _as_dict(data.get("xdp"))
        # The new keys win where given; the old switch fills the rest.
        data["queues"] = {"writes": mode, "mode": "apply", **queues}
        data["xdp"] = {"mode": mode, **xdp}
        warnings.warn(
            "settings key actuators.mode is deprecated: use actuators.queues.writes (and actuators.queues.mode: "
            "apply to resize queues), and actuators.xdp.mode",
            DeprecatedSettingWarning,
            stacklevel=2,
        )
        return data

    @property
    def mode(self) -> str:
        """The queue write mode (plan | server-dry-run | apply): what audit records and cooldowns are keyed by."""
        return self.queues.writes

    @property
    def dry_run(self) -> bool:
        return self.queues.writes != "apply"

    @property
    def writes_cluster(self) -> bool:
        """Whether anything is sent to the API server (queues or the XDP inputs ConfigMap)."""
        return self.queues.writes != "plan" or self.xdp.mode != "plan"


def _as_dict(section: Any) -> dict[str, Any]:
    if isinstance(section, BaseModel):
        return section.model_dump(exclude_unset=True)
    return dict(section) if isinstance(section, Mapping) else {}
