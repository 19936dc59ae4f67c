"""Held-out check of right-sizing: recommend from the runs before a split, score on the runs after it.

This is how a recommendation is used — computed once from history, left in place for the next runs — so
it is how the stated risk is judged: the share of later runs that needed more than recommended should
stay at or below it. The rules platform teams run today (VPA's p90 + 15 %, KRR's max + 15 %, the request
as it is) are computed from the same history and rounded the same way, and every method is scored by
``models.demand.provisioning_metrics`` so the comparison cannot drift.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from models.demand import HEADROOM, krr_rule, metrics_table, provisioning_metrics, round_up_to_sizes, vpa_rule
from predictor.rightsize.recommend import RightsizeSettings, recommend

__all__ = ["RULES", "backtest", "least_slack", "pareto", "rule_curve", "slack_at"]

RULES = ("request", "vpa (p90+15%)", "krr (max+15%)")


def _rule_table(
    history: pd.DataFrame, settings: RightsizeSettings, used_col: str, headroom: float = HEADROOM
) -> pd.DataFrame:
    """VPA, KRR and the request per workload from its history, rounded like the model's output."""
    rows = []
    for (namespace, workload), g in history.groupby(["namespace", "workload"], sort=True):
        request = float(g.sort_values("start")["gpu_request"].iloc[-1])
        used = g[used_col].to_numpy(np.float64)
        mem = g["mem_peak_mib"].to_numpy(np.float64) / 1024
        card = float(g["gpu_mem_total_mib"].max()) / 1024
        row: dict[str, object] = {"namespace": namespace, "workload": workload}
        for name, rule in (("vpa", vpa_rule), ("krr", krr_rule)):
            gpus = round_up_to_sizes(np.array([rule(used, headroom)]), settings.sharing_sizes)[0]
            row[f"{name}_gpus"] = float(np.clip(gpus, min(request, min(settings.sharing_sizes, default=1.0)), request))
            row[f"{name}_mem"] = float(min(np.ceil(rule(mem, headroom) * 2) / 2, card))
        row["request_gpus"], row["request_mem"] = request, card
        rows.append(row)
    return pd.DataFrame(rows)


def _split(runs: pd.DataFrame, split: pd.Timestamp) -> tuple[pd.DataFrame, pd.DataFrame]:
    history = runs[runs["end"] < split]
    later = runs[runs["start"] >= split]
    later = later.merge(history[["namespace", "workload"]].drop_duplicates(), on=["namespace", "workload"])
    if history.empty or later.empty:
        raise ValueError(f"split {split} leaves no history or no later runs of known workloads")
    return history, later


def _scorer(later: pd.DataFrame, used_col: str) -> Callable[[np.ndarray, np.ndarray], dict[str, float]]:
    used = later[used_col].to_numpy(np.float64)
    mem_used = later["mem_peak_mib"].to_numpy(np.float64) / 1024
    hours = later["runtime_h"].to_numpy(np.float64)

    def score(gpus: np.ndarray, mem: np.ndarray) -> dict[str, float]:
        g = provisioning_metrics(used, gpus, hours)
        m = provisioning_metrics(mem_used, mem, hours)
        return {
            "gpu_slack": g["slack"],
            "gpu_under": g["under"],
            "mem_slack": m["slack"],
            "mem_under": m["under"],
            "runs": g["rows"],
        }

    return score


def backtest(
    runs: pd.DataFrame, split: pd.Timestamp, risks: Sequence[float], settings: RightsizeSettings | None = None
) -> pd.DataFrame:
    """Per method (the rules, then the model at each risk): GPU and memory slack and under-provisioning.

    History is the runs that ended before ``split``; scored are the later runs (started at or after it)
    of workloads that have history. A model row with "not enough data" keeps the request and the card.
    """
    settings = settings or RightsizeSettings()
    used_col = "gpu_equiv_p95" if settings.sharing_sizes else "gpus_used_p95"
    history, later = _split(runs, split)
    scored = later.merge(_rule_table(history, settings, used_col), on=["namespace", "workload"], how="left")
    score = _scorer(scored, used_col)
    rows: dict[str, dict[str, float]] = {}
    for name, prefix in zip(RULES, ("request", "vpa", "krr"), strict=True):
        rows[name] = {
            "risk": float("nan"),
            **score(scored[f"{prefix}_gpus"].to_numpy(np.float64), scored[f"{prefix}_mem"].to_numpy(np.float64)),
        }
    for risk in risks:
        table = recommend(history, settings.model_copy(update={"risk": float(risk)}))
        model = scored[["namespace", "workload", "request_gpus", "request_mem"]].merge(
            table[["namespace", "workload", "recommended_gpus", "recommended_gpu_mem_gib"]],
            on=["namespace", "workload"],
            how="left",
        )
        gpus = model["recommended_gpus"].fillna(model["request_gpus"]).to_numpy(np.float64)
        mem = model["recommended_gpu_mem_gib"].fillna(model["request_mem"]).to_numpy(np.float64)
        rows[f"model R={risk:g}"] = {"risk": float(risk), **score(gpus, mem)}
    return metrics_table(rows)


def rule_curve(
    runs: pd.DataFrame,
    split: pd.Timestamp,
    headrooms: Sequence[float] = (0.0, 0.05, 0.1, 0.15, 0.25, 0.4, 0.6, 1.0),
    settings: RightsizeSettings | None = None,
) -> pd.DataFrame:
    """The VPA and KRR rules' own trade-off curves: the same backtest with their margin swept over
    ``headrooms``, so the model can be compared with a rule at the *same* under-provisioning."""
    settings = settings or RightsizeSettings()
    used_col = "gpu_equiv_p95" if settings.sharing_sizes else "gpus_used_p95"
    history, later = _split(runs, split)
    rows = []
    for headroom in headrooms:
        scored = later.merge(_rule_table(history, settings, used_col, headroom), on=["namespace", "workload"])
        score = _scorer(scored, used_col)
        for prefix in ("vpa", "krr"):
            rows.append(
                {
                    "rule": prefix,
                    "headroom": headroom,
                    **score(
                        scored[f"{prefix}_gpus"].to_numpy(np.float64), scored[f"{prefix}_mem"].to_numpy(np.float64)
                    ),
                }
            )
    return pd.DataFrame(rows)


def least_slack(used: np.ndarray, hours: np.ndarray, under: float) -> float:
    """The least slack *any* recommendation can have on these runs while under-provisioning at most a share
    ``under`` of them: an oracle that knows every run's use gives exactly that to all but the
    ``⌊under · n⌋`` runs with the most use × hours, and nothing to those. Slack at or below this is out of
    reach of every method; a rule whose slack is lower got there by under-provisioning more runs."""
    u = np.asarray(used, dtype=np.float64)
    h = np.asarray(hours, dtype=np.float64)
    ok = np.isfinite(u) & np.isfinite(h)
    weight = u[ok] * h[ok]
    if weight.size == 0 or weight.sum() <= 0:
        return float("nan")
    skip = int(np.floor(under * weight.size + 1e-9))
    covered = float(np.sort(weight)[: weight.size - skip].sum())
    return 1.0 - float(weight.sum()) / covered if covered > 0 else float("-inf")


def slack_at(curve: pd.DataFrame, under: float, resource: str = "mem") -> float:
    """The least slack any point of a rule curve reaches without under-provisioning more than ``under``
    (NaN when every point under-provisions more): where the rules' curve sits at the model's level."""
    ok = curve[curve[f"{resource}_under"] <= under + 1e-12]
    return float(ok[f"{resource}_slack"].min()) if not ok.empty else float("nan")


def pareto(table: pd.DataFrame, resource: str = "mem", curve: pd.DataFrame | None = None) -> pd.DataFrame:
    """For each model risk: its slack and under-provisioning beside the VPA rule's, whether it holds the
    stated risk and sits at or below VPA's slack, and (given the rules' ``curve``) the least slack a rule
    reaches at the model's under-provisioning: the model is on or below the rules' curve when its slack
    is at most that."""
    vpa = table[table["method"] == RULES[1]].iloc[0]
    model = table[table["risk"].notna()]
    under = model[f"{resource}_under"].to_numpy()
    slack = model[f"{resource}_slack"].to_numpy()
    out = pd.DataFrame(
        {
            "risk": model["risk"].to_numpy(),
            "slack": slack,
            "under": under,
            "vpa_slack": float(vpa[f"{resource}_slack"]),
            "vpa_under": float(vpa[f"{resource}_under"]),
            "holds_risk": under <= model["risk"].to_numpy() + 1e-12,
            "slack_le_vpa": slack <= float(vpa[f"{resource}_slack"]) + 1e-12,
        }
    )
    if curve is not None:
        rules = np.array([slack_at(curve, u, resource) for u in under])
        out["rules_slack_same_under"] = rules
        out["on_or_below_rules"] = ~(slack > rules + 1e-12)  # NaN (no rule gets that low) counts as below
    return out
