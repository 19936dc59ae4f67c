"""Per-workload recommendations: GPUs and GPU memory from what a workload's runs really used.

The rules a platform team can defend in a review: never recommend less than was used (rounded up to whole
GPUs, or to the slices a GPU-sharing setup offers), give memory headroom over its p99 and never go below
its peak, never exceed the request or the card, and say "not enough data" — keeping the request — when
the history is too short to trust, as KRR does. Every row carries a confidence and a reason in words.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from models.demand import round_up_to_sizes

__all__ = ["OUTPUT_COLUMNS", "RightsizeSettings", "recommend"]

OUTPUT_COLUMNS = (
    "namespace", "workload", "queue", "gpu_type", "runs", "gpu_request", "gpus_used_p95", "gpu_mem_used_gib_p99",
    "recommended_gpus", "recommended_gpu_mem_gib", "confidence", "reason",
)
NOT_ENOUGH = "not enough data"


class RightsizeSettings(BaseModel):
    """Knobs of ``predictor rightsize`` (defaults follow VPA/KRR practice)."""

    model_config = ConfigDict(extra="forbid")

    step_s: int = Field(300, ge=1, le=3600, description="Sample step of the history, seconds.")
    busy_threshold_pct: float = Field(5.0, ge=0, le=100, description="A GPU above this utilisation is busy.")
    early_minutes: float = Field(30.0, gt=0, le=1440, description="Length of a run's 'first minutes'.")
    mem_headroom: float = Field(0.15, ge=0, le=2, description="Headroom over p99 GPU memory.")
    min_history_h: float = Field(1.0, ge=0, description="Less history than this is 'not enough data'.")
    min_samples: int = Field(12, ge=1, description="Fewer GPU samples than this is 'not enough data'.")
    sharing_sizes: tuple[float, ...] = Field(
        (), description="GPU fractions a sharing setup offers (e.g. 0.25, 0.5); empty: whole GPUs only."
    )


def _confidence(runs: int, span_h: float) -> str:
    if runs >= 5 and span_h >= 24:
        return "high"
    if runs >= 2 or span_h >= 6:
        return "medium"
    return "low"


def recommend(runs: pd.DataFrame, settings: RightsizeSettings) -> pd.DataFrame:
    """One row per (namespace, workload) with ``OUTPUT_COLUMNS`` from a run table (``runs_from_frames``)."""
    rows = []
    sharing = bool(settings.sharing_sizes)
    used_col = "gpu_equiv_p95" if sharing else "gpus_used_p95"
    for (namespace, workload), g in runs.sort_values("start").groupby(["namespace", "workload"], sort=True):
        request = float(g["gpu_request"].iloc[-1])  # the latest run's request is the one to change
        used = g[used_col].to_numpy(np.float64)
        used_p95 = float(np.quantile(used, 0.95))
        mem_p99 = float(np.nanquantile(g["mem_p99_mib"], 0.99)) / 1024 if g["mem_p99_mib"].notna().any() else np.nan
        mem_peak = float(g["mem_peak_mib"].max()) / 1024 if g["mem_peak_mib"].notna().any() else np.nan
        total = float(g["gpu_mem_total_mib"].max()) / 1024
        span_h = float(((g["end"].max() - g["start"].min()).total_seconds() + settings.step_s) / 3600)
        samples = int(g["samples"].sum())
        row = {
            "namespace": namespace, "workload": workload, "queue": str(g["queue"].mode().iat[0]),
            "gpu_type": str(g["gpu_type"].mode().iat[0]), "runs": len(g), "gpu_request": request,
            "gpus_used_p95": round(used_p95, 3), "gpu_mem_used_gib_p99": round(mem_p99, 2),
        }
        if span_h < settings.min_history_h or samples < settings.min_samples:
            rows.append({
                **row, "recommended_gpus": request, "recommended_gpu_mem_gib": np.nan, "confidence": NOT_ENOUGH,
                "reason": f"{NOT_ENOUGH}: {span_h:.2f} h and {samples} GPU samples (need {settings.min_history_h:g} h "
                          f"and {settings.min_samples}); keeping the request",
            })
            continue
        mem = max(mem_p99 * (1 + settings.mem_headroom), mem_peak) if np.isfinite(mem_p99) else np.nan
        if np.isfinite(total):
            mem = min(mem, total)
        mem = float(np.ceil(mem * 2) / 2) if np.isfinite(mem) else np.nan
        # Never below the most any run kept busy; a shared slice must also hold the memory it needs.
        need = float(used.max())
        if sharing and np.isfinite(mem) and np.isfinite(total) and total > 0:
            need = max(need, mem / total * max(1.0, np.ceil(need)))
        floor = min(request, min(settings.sharing_sizes, default=1.0)) if request > 0 else 0.0
        gpus = float(min(round_up_to_sizes(np.array([max(need, floor)]), settings.sharing_sizes)[0], request))
        mem_text = f"{mem_peak:.1f} GiB peak memory, {mem:.1f} GiB with {settings.mem_headroom:.0%} headroom" \
            if np.isfinite(mem) else "no GPU memory series"
        what = "GPU-equivalents of utilisation" if sharing else f"GPUs above {settings.busy_threshold_pct:g} % busy"
        verdict = "request matches use" if gpus >= request else f"{request - gpus:g} of {request:g} GPUs idle"
        rows.append({
            **row, "recommended_gpus": gpus, "recommended_gpu_mem_gib": mem,
            "confidence": _confidence(len(g), span_h),
            "reason": f"{verdict}: at most {need:.2f} {what} over {len(g)} run(s) in {span_h:.1f} h; {mem_text}",
        })
    return pd.DataFrame(rows, columns=list(OUTPUT_COLUMNS))
