"""Held-out check of right-sizing: recommend from the runs before a split, score on the runs after it.

This is how a recommendation is used — computed once from history, left in place for the next runs — so
it is how the stated risk is judged: the share of later runs that needed more than recommended should
stay at or below it. The rules platform teams run today (VPA's p90 + 15 %, KRR's max + 15 %, the request
as it is) are computed from the same history and rounded the same way, and every method is scored by
``models.demand.provisioning_metrics`` so the comparison cannot drift.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from models.demand import krr_rule, metrics_table, provisioning_metrics, round_up_to_sizes, vpa_rule
from predictor.rightsize.recommend import RightsizeSettings, recommend

__all__ = ["RULES", "backtest", "pareto"]

RULES = ("request", "vpa (p90+15%)", "krr (max+15%)")


def _rule_table(history: pd.DataFrame, settings: RightsizeSettings, used_col: str) -> pd.DataFrame:
    """VPA, KRR and the request per workload from its history, rounded like the model's output."""
    rows = []
    for (namespace, workload), g in history.groupby(["namespace", "workload"], sort=True):
        request = float(g.sort_values("start")["gpu_request"].iloc[-1])
        used = g[used_col].to_numpy(np.float64)
        mem = g["mem_peak_mib"].to_numpy(np.float64) / 1024
        card = float(g["gpu_mem_total_mib"].max()) / 1024
        row: dict[str, object] = {"namespace": namespace, "workload": workload}
        for name, rule in (("vpa", vpa_rule), ("krr", krr_rule)):
            gpus = round_up_to_sizes(np.array([rule(used)]), settings.sharing_sizes)[0]
            row[f"{name}_gpus"] = float(np.clip(gpus, min(request, min(settings.sharing_sizes, default=1.0)), request))
            row[f"{name}_mem"] = float(min(np.ceil(rule(mem) * 2) / 2, card))
        row["request_gpus"], row["request_mem"] = request, card
        rows.append(row)
    return pd.DataFrame(rows)


def backtest(
    runs: pd.DataFrame, split: pd.Timestamp, risks: Sequence[float], settings: RightsizeSettings | None = None
) -> pd.DataFrame:
    """Per method (the rules, then the model at each risk): GPU and memory slack and under-provisioning.

    History is the runs that ended before ``split``; scored are the later runs (started at or after it)
    of workloads that have history. A model row with "not enough data" keeps the request and the card.
    """
    settings = settings or RightsizeSettings()
    used_col = "gpu_equiv_p95" if settings.sharing_sizes else "gpus_used_p95"
    history = runs[runs["end"] < split]
    later = runs[runs["start"] >= split]
    known = history[["namespace", "workload"]].drop_duplicates()
    later = later.merge(known, on=["namespace", "workload"])
    if history.empty or later.empty:
        raise ValueError(f"split {split} leaves no history or no later runs of known workloads")
    rules = _rule_table(history, settings, used_col)
    scored = later.merge(rules, on=["namespace", "workload"], how="left")
    used = scored[used_col].to_numpy(np.float64)
    mem_used = scored["mem_peak_mib"].to_numpy(np.float64) / 1024
    hours = scored["runtime_h"].to_numpy(np.float64)

    def score(gpus: np.ndarray, mem: np.ndarray) -> dict[str, float]:
        g = provisioning_metrics(used, gpus, hours)
        m = provisioning_metrics(mem_used, mem, hours)
        return {"gpu_slack": g["slack"], "gpu_under": g["under"], "mem_slack": m["slack"],
                "mem_under": m["under"], "runs": g["rows"]}

    rows: dict[str, dict[str, float]] = {}
    for name, prefix in zip(RULES, ("request", "vpa", "krr"), strict=True):
        rows[name] = {"risk": float("nan"), **score(scored[f"{prefix}_gpus"].to_numpy(np.float64),
                                                    scored[f"{prefix}_mem"].to_numpy(np.float64))}
    for risk in risks:
        table = recommend(history, settings.model_copy(update={"risk": float(risk)}))
        model = scored[["namespace", "workload", "request_gpus", "request_mem"]].merge(
            table[["namespace", "workload", "recommended_gpus", "recommended_gpu_mem_gib"]],
            on=["namespace", "workload"], how="left")
        gpus = model["recommended_gpus"].fillna(model["request_gpus"]).to_numpy(np.float64)
        mem = model["recommended_gpu_mem_gib"].fillna(model["request_mem"]).to_numpy(np.float64)
        rows[f"model R={risk:g}"] = {"risk": float(risk), **score(gpus, mem)}
    return metrics_table(rows)


def pareto(table: pd.DataFrame, resource: str = "mem") -> pd.DataFrame:
    """For each model risk: its slack and under-provisioning beside the VPA rule's, and whether it holds
    the stated risk and sits at or below VPA's slack."""
    vpa = table[table["method"] == RULES[1]].iloc[0]
    model = table[table["risk"].notna()]
    return pd.DataFrame({
        "risk": model["risk"].to_numpy(),
        "slack": model[f"{resource}_slack"].to_numpy(),
        "under": model[f"{resource}_under"].to_numpy(),
        "vpa_slack": float(vpa[f"{resource}_slack"]),
        "vpa_under": float(vpa[f"{resource}_under"]),
        "holds_risk": (model[f"{resource}_under"] <= model["risk"] + 1e-12).to_numpy(),
        "slack_le_vpa": (model[f"{resource}_slack"] <= float(vpa[f"{resource}_slack"]) + 1e-12).to_numpy(),
    })
