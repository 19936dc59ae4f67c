"""Per-workload recommendations: GPUs and GPU memory at a stated risk, from what a workload's runs used.

A rule a platform team can defend in a review: "at most R of the next runs need more than this". The
bound is conformal (``models.demand_risk``) on the workload's own runs, pooled with similar workloads
(same queue and request, then the cluster) while its own history is short; rounded up to whole GPUs or
the slices a sharing setup offers and to half GiB, never above the request or the card. Too little
history to trust keeps the request ("not enough data"), as KRR does. Every row carries the risk, a
confidence that follows the evidence tier and a reason in words.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from models.demand import round_up_to_sizes
from models.demand_risk import RiskBound, forecast_residuals, risk_bound
from predictor.rightsize.elastic import ElasticSettings, worker_advice
from predictor.rightsize.energy import EnergySettings, power_advice

__all__ = ["OUTPUT_COLUMNS", "RightsizeSettings", "recommend"]

OUTPUT_COLUMNS = (
    "namespace",
    "workload",
    "queue",
    "gpu_type",
    "runs",
    "gpu_request",
    "gpus_used_p95",
    "gpu_mem_used_gib_p99",
    "recommended_gpus",
    "recommended_gpu_mem_gib",
    "confidence",
    "reason",
    "risk",
    "recommended_workers",
    "recommended_power_cap_w",
    "energy_saving_kwh_week",
)
CONFIDENCE = {"own": "high", "similar": "medium", "cluster": "low"}
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
    risk: float = Field(0.02, gt=0, lt=0.5, description="Share of future runs allowed to need more than recommended.")
    horizon_days: float = Field(
        7.0,
        gt=0,
        le=90,
        description="How long a recommendation stays in place (a growing workload's runs up to then are covered).",
    )
    elastic: ElasticSettings = Field(default_factory=ElasticSettings, description="Elastic-worker advice.")
    energy: EnergySettings = Field(default_factory=EnergySettings, description="Power-cap advice.")


def _fractions(g: pd.DataFrame, used_col: str) -> tuple[np.ndarray, np.ndarray]:
    """Per run, in start order: used share of the request and peak memory share of the card."""
    request = g["gpu_request"].to_numpy(np.float64)
    used = g[used_col].to_numpy(np.float64) / np.maximum(request, 1e-9)
    total = g["gpu_mem_total_mib"].to_numpy(np.float64)
    return used, g["mem_peak_mib"].to_numpy(np.float64) / total


def _pools(keys: list[tuple[str, str]], residuals: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per workload: residuals of the other workloads with the same key, and of every other workload."""
    everyone = np.concatenate(residuals) if residuals else np.array([])
    sizes = [r.size for r in residuals]
    by_key: dict[tuple[str, str], list[int]] = {}
    for i, key in enumerate(keys):
        by_key.setdefault(key, []).append(i)
    out = []
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    for i, key in enumerate(keys):
        similar = [residuals[j] for j in by_key[key] if j != i]
        others = np.delete(everyone, np.arange(offsets[i], offsets[i + 1]))
        out.append((np.concatenate(similar) if similar else np.array([]), others))
    return out


def _ahead(g: pd.DataFrame, horizon_days: float) -> int:
    """Runs the workload is expected to start before the recommendation is next revisited."""
    span_days = max((g["start"].max() - g["start"].min()).total_seconds() / 86400, 1.0)
    return int(np.clip(round((len(g) - 1) / span_days * horizon_days), 1, 200))


def recommend(
    runs: pd.DataFrame, settings: RightsizeSettings, idle_quota: Mapping[str, float] | None = None
) -> pd.DataFrame:
    """One row per (namespace, workload) with ``OUTPUT_COLUMNS`` from a run table (``runs_from_frames``).

    ``idle_quota``: idle GPUs of quota per queue (``elastic.idle_quota``), for growth advice; a queue
    missing from it (or no mapping at all) gets none. Workloads of one queue share its idle quota: each
    growth advice (in table order) takes its GPUs out of what the next workload may grow into.
    """
    idle_left = dict(idle_quota) if idle_quota is not None else None
    sharing = bool(settings.sharing_sizes)
    used_col = "gpu_equiv_p95" if sharing else "gpus_used_p95"
    groups = list(runs.sort_values("start", kind="stable").groupby(["namespace", "workload"], sort=True))
    fractions = [_fractions(g, used_col) for _, g in groups]
    keys = [(str(g["queue"].mode().iat[0]), f"{float(g['gpu_request'].iloc[-1]):g}") for _, g in groups]
    gpu_pools = _pools(keys, [forecast_residuals(f[0]) for f in fractions])
    mem_pools = _pools(keys, [forecast_residuals(f[1]) for f in fractions])
    # A card's peak power: the highest run mean seen on that GPU type (DCGM reports no limit here).
    peak = runs.groupby("gpu_type")["power_mean_w"].max() if "power_mean_w" in runs.columns else pd.Series()
    rows = []
    for i, ((namespace, workload), g) in enumerate(groups):
        ahead = _ahead(g, settings.horizon_days)
        gpu_bound = risk_bound(fractions[i][0], settings.risk, gpu_pools[i], ahead=ahead)
        mem_bound = risk_bound(fractions[i][1], settings.risk, mem_pools[i], ahead=ahead)
        queue = str(g["queue"].iloc[-1])
        idle = None if idle_left is None else idle_left.get(queue)
        row = _row(str(namespace), str(workload), g, settings, used_col, gpu_bound, mem_bound, idle)
        workers, pods = float(str(row["recommended_workers"])), int(g["pods"].iloc[-1])
        if idle_left is not None and idle is not None and workers > pods > 0:
            idle_left[queue] = idle - (workers - pods) * float(g["gpu_request"].iloc[-1]) / pods
        if "power_mean_w" in g.columns and row["confidence"] != NOT_ENOUGH:
            cap, kwh, advice = power_advice(g, float(peak.get(str(row["gpu_type"]), np.nan)), settings.energy)
            row.update(recommended_power_cap_w=cap, energy_saving_kwh_week=kwh)
            row["reason"] = f"{row['reason']}; energy: {advice}" if advice else row["reason"]
        rows.append(row)
    return pd.DataFrame(rows, columns=list(OUTPUT_COLUMNS))


def _row(
    namespace: str,
    workload: str,
    g: pd.DataFrame,
    settings: RightsizeSettings,
    used_col: str,
    gpu_bound: RiskBound,
    mem_bound: RiskBound,
    idle_gpus: float | None = None,
) -> dict[str, object]:
    request = float(g["gpu_request"].iloc[-1])  # the latest run's request is the one to change
    used = g[used_col].to_numpy(np.float64)
    mem_p99 = float(np.nanquantile(g["mem_p99_mib"], 0.99)) / 1024 if g["mem_p99_mib"].notna().any() else np.nan
    total = float(g["gpu_mem_total_mib"].max()) / 1024
    span_h = float(((g["end"].max() - g["start"].min()).total_seconds() + settings.step_s) / 3600)
    samples = int(g["samples"].sum())
    row: dict[str, object] = {
        "namespace": namespace,
        "workload": workload,
        "queue": str(g["queue"].mode().iat[0]),
        "gpu_type": str(g["gpu_type"].mode().iat[0]),
        "runs": len(g),
        "gpu_request": request,
        "gpus_used_p95": round(float(np.quantile(used, 0.95)), 3),
        "gpu_mem_used_gib_p99": round(mem_p99, 2),
        "risk": settings.risk,
        "recommended_workers": np.nan,
        "recommended_power_cap_w": np.nan,
        "energy_saving_kwh_week": np.nan,
    }
    tiers = [b.tier for b in (gpu_bound, mem_bound) if np.isfinite(mem_p99) or b is gpu_bound]
    if span_h < settings.min_history_h or samples < settings.min_samples or "none" in tiers:
        why = (
            f"{span_h:.2f} h and {samples} GPU samples (need {settings.min_history_h:g} h and {settings.min_samples})"
            if "none" not in tiers
            else f"{len(g)} run(s) and too few similar workloads for a {settings.risk:.0%} risk"
        )
        return {
            **row,
            "recommended_gpus": request,
            "recommended_gpu_mem_gib": np.nan,
            "confidence": NOT_ENOUGH,
            "reason": f"{NOT_ENOUGH}: {why}; keeping the request",
        }
    smallest = min(settings.sharing_sizes, default=1.0)
    floor = min(request, smallest) if request > 0 else 0.0
    need = gpu_bound.value * request
    gpus = float(min(round_up_to_sizes(np.array([max(need, floor)]), settings.sharing_sizes)[0], request))
    mem = (
        float(min(np.ceil(mem_bound.value * total * 2) / 2, total))
        if np.isfinite(mem_p99) and np.isfinite(total)
        else np.nan
    )
    rank = ["own", "similar", "cluster"]
    tier = max(tiers, key=rank.index)
    what = (
        "GPU-equivalents of utilisation"
        if settings.sharing_sizes
        else f"GPUs above {settings.busy_threshold_pct:g} % busy"
    )
    verdict = "request matches use" if gpus >= request else f"{request - gpus:g} of {request:g} GPUs idle"
    evidence = {
        "own": "its own runs",
        "similar": "its runs pooled with the same queue and request",
        "cluster": "its runs pooled with the whole cluster",
    }[tier]
    mem_text = f"{mem:.1f} GiB memory" if np.isfinite(mem) else "no GPU memory series"
    workers, advice = worker_advice(g, gpus, settings.elastic, idle_gpus)
    return {
        **row,
        "recommended_gpus": gpus,
        "recommended_gpu_mem_gib": mem,
        "confidence": CONFIDENCE[tier],
        "recommended_workers": workers,
        "reason": f"{verdict}: at most {settings.risk:.0%} of runs over {need:.2f} {what} and {mem_text} "
        f"(conformal on {evidence}, {gpu_bound.scores} residuals; {len(g)} run(s) in {span_h:.1f} h)"
        + (f"; workers: {advice}" if advice else ""),
    }
