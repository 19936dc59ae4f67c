"""When and how the loop diagnoses root causes (``predictor.loop.rca``); off unless enabled."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["DiagnoseLoopSettings"]


class DiagnoseLoopSettings(BaseModel):
    """The ``gpu-rca`` champion run by the loop on the Prometheus window when something leaves its band."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        False,
        description="Each cycle, look for triggers (a queue's demand outside its forecast band, a job's GPU "
        "utilisation outside its band, a job restart or retry) and, when one fires, diagnose the window with "
        "the gpu-rca champion: findings are audited, exported as predictor_rca_finding and hold queues whose "
        "jobs are stalled by a fault (code rca_fault).",
    )
    window_s: float = Field(
        900.0,
        ge=60,
        le=6 * 3600,
        allow_inf_nan=False,
        description="Length of the diagnosed window ending at the cycle's time; the window before it is the "
        "baseline the features and the GPU utilisation band compare with (2 × window_s is read).",
    )
    step_s: float = Field(
        60.0,
        ge=1,
        le=3600,
        allow_inf_nan=False,
        description="Query step of the window read from Prometheus; at most a third of window_s.",
    )
    min_probability: float = Field(
        0.5,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="A cause less probable than this is not a finding (as predictor diagnose).",
    )

    @model_validator(mode="after")
    def _steps_in_window(self) -> DiagnoseLoopSettings:
        if self.step_s * 3 > self.window_s:
            raise ValueError(
                f"step_s ({self.step_s:g}) must be at most a third of window_s ({self.window_s:g}): "
                "a window needs several samples to be diagnosed"
            )
        return self
