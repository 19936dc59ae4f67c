"""``diagnose``: a window of history (Prometheus or a file) → ranked findings with scope and explanation.

The same ``window_features`` the tree was trained on run on whatever source answers; every candidate
(node or queue) is scored, candidates whose most likely class is a cause become findings, the findings of
one job-wide cause are merged (a congested job shows on all its nodes), and an all-clear window yields one
``healthy`` finding. Every finding carries a ``remediation`` sentence; the result lists the metric
``families`` it found and missed, and the ``profile`` (``models.rca_profiles``) those families select: the
tree of that profile answers, fitted with exactly its families, so a family the site never exports is not
"unmeasured" evidence but simply not part of the model. Missing data beyond the profile are unknown, not
evidence: a candidate whose answer rests mostly on unmeasured features gives ``insufficient_data`` naming the
families to enable, and a cause the profile cannot tell at all is named, with its families, on the all-clear
finding. The output is the JSON contract of ``predictor diagnose``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from models.frames import TIME
from models.rca import HEALTHY, MIN_MEASURED, RootCauseTree
from models.rca_features import FEATURE_NAMES, WindowData, window_features
from models.rca_profiled import ProfiledRca, blank
from models.rca_specs import METRIC_FAMILIES, SPECS
from predictor.diagnose.remediation import INSUFFICIENT, enable_advice, remediation
from predictor.errors import InputError
from predictor.sources import MetricSource, Selector

__all__ = [
    "GPU_COLUMN",
    "MIN_MEASURED",
    "NEEDED_METRICS",
    "diagnose",
    "fetch_window",
    "format_window",
    "history_window",
    "parse_scope",
]

# The series the symptom features read (``models.rca_specs``, derived from the feature specs): what
# diagnosis fetches, and what the training data (``pipelines.rca_data``) keep of a simulator run, so both
# see the same inputs.
NEEDED_METRICS = METRIC_FAMILIES

# Which GPU a finding names, by cause: the argmax of the symptom that points at one GPU.
GPU_COLUMN = {
    "gpu_thermal": "gpu_hot",
    "gpu_power_cap": "gpu_slow",
    "gpu_hardware": "gpu_xid",
    "nvlink": "gpu_crc",
    "gpu_oom": "gpu_fb",
}
_JOB_WIDE = (
    "nvlink",
    "gpu_oom",
    "network_congestion",
    "io_stall",
    "cpu_contention",
    "roce_pfc_storm",
    "roce_congestion",
)
SCOPE_KEYS = ("node", "gpu", "job", "queue")
_FAMILIES_OF = {s.name: s.families for s in SPECS}


def parse_scope(text: str | None) -> dict[str, str]:
    """``node=X`` (or ``gpu=N``, ``job=J``, ``queue=Q``, comma-separated) → a filter on candidates."""
    if not text:
        return {}
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in SCOPE_KEYS or not value.strip():
            raise InputError(f"--scope {text!r}: expected key=value with key in {', '.join(SCOPE_KEYS)}")
        out[key] = value.strip()
    return out


def format_window(window: pd.Timedelta) -> str:
    seconds = int(window.total_seconds())
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def fetch_window(
    source: MetricSource,
    at: pd.Timestamp,
    window: pd.Timedelta,
    step: pd.Timedelta,
    metrics: Iterable[str] = NEEDED_METRICS,
) -> pd.DataFrame:
    """The history diagnosis needs, ``(at - 2·window, at]``, one range query per standard series."""
    start = at - 2 * window + step
    frames = []
    for name in metrics:
        frame = source.query_range(str(Selector(name)), start, at, step)
        if len(frame):
            frames.append(frame.assign(__name__=frame["__name__"] if "__name__" in frame.columns else name))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def history_window(frame: pd.DataFrame, at: pd.Timestamp, window: pd.Timedelta) -> pd.DataFrame:
    """The rows of a long history frame that one diagnosis reads."""
    stamps = pd.to_datetime(frame[TIME], utc=True)
    return frame[(stamps > at - 2 * window) & (stamps <= at)]


def _none(value: Any) -> str | None:
    return str(value) if isinstance(value, str) and value else None


def _families(data: WindowData) -> dict[str, list[str]]:
    found = [m for m in NEEDED_METRICS if m in data.tables]
    return {"found": found, "missing": [m for m in NEEDED_METRICS if m not in data.tables]}


def diagnose(
    frame: pd.DataFrame,
    model: ProfiledRca | RootCauseTree,
    at: pd.Timestamp,
    window: pd.Timedelta,
    scope: dict[str, str] | None = None,
    *,
    min_probability: float = 0.5,
    min_measured: float = MIN_MEASURED,
) -> dict[str, Any]:
    """The findings for the window ending at ``at``, in the ``predictor diagnose`` JSON shape.

    A candidate whose answer rests mostly on unmeasured features (``measured_share < min_measured``) never
    yields a fault: it can only add to an ``insufficient_data`` finding, which is also the answer when most
    candidates are in that state and nothing else was found. A single tree (an older model) answers as
    the one profile it was fitted for.
    """
    if frame.empty:
        raise InputError(f"no samples between {(at - 2 * window).isoformat()} and {at.isoformat()}")
    profiled = model if isinstance(model, ProfiledRca) else ProfiledRca.of_tree(model)
    data = WindowData(frame)
    families = _families(data)
    profile, tree = profiled.for_present(families["found"])
    result: dict[str, Any] = {
        "at": at.isoformat().replace("+00:00", "Z"),
        "window": format_window(window),
        "families": families,
        "profile": profile.name,
        "findings": [],
    }
    feats = window_features(data, at, window)
    for name, value in (scope or {}).items():
        feats = feats[feats[name] == value] if name != "gpu" else feats
    if feats.empty and scope:
        wanted_scope = ",".join(f"{k}={v}" for k, v in scope.items())
        raise InputError(f"--scope {wanted_scope}: no such node, job or queue in the window")
    if feats.empty:  # no --scope was given: naming it would send the user after a flag they never passed
        raise InputError(f"no node, job or queue to diagnose between {(at - window).isoformat()} and {at.isoformat()}")
    X = blank(feats[list(FEATURE_NAMES)], profile)  # what the profile lacks, its tree never reads
    proba = tree.predict_proba(X)
    measured = tree.measured_share(X)
    unknown = tree.unmeasured(X)
    explanations = tree.explain(X)
    classes = [str(c) for c in tree.classes_]
    missing = tuple(families["missing"])
    wanted: list[str] = []  # missing families the unsure answers read, most needed first
    records: list[dict[str, Any]] = [{str(k): v for k, v in r.items()} for r in feats.to_dict("records")]
    findings: dict[tuple[str, str], dict[str, Any]] = {}
    unsure: list[str] = []
    for i, row in enumerate(records):
        node, queue = str(row["node"]), str(row["queue"])
        where = f"queue={queue}" if queue else f"node={node}"
        for j in np.argsort(-proba[i]):
            cause, p = classes[j], float(proba[i, j])
            if cause == HEALTHY or p < min_probability:
                continue
            if measured[i] < min_measured:
                wanted += [f for name in unknown[i] for f in _FAMILIES_OF.get(name, ()) if f in missing]
                unsure.append(
                    f"{where} might be {cause} ({p:.2f}) but {1 - measured[i]:.0%} of that answer "
                    f"rests on unmeasured {', '.join(unknown[i][:4])}"
                )
                continue
            gpu = _none(row[GPU_COLUMN[cause]]) if cause in GPU_COLUMN else None
            if scope and "gpu" in scope and gpu != scope["gpu"]:
                continue
            on_gpu = dict(pair.split(":", 1) for pair in str(row["gpu_jobs"]).split(",") if ":" in pair)
            job = _none(on_gpu.get(gpu, row["job"]) if gpu else row["job"]) if cause != "node_not_ready" else None
            here = f"queue={queue}" if queue else f"node={node}" + (f" gpu={gpu}" if gpu else "")
            finding = {
                "cause": cause,
                "probability": round(p, 4),
                "scope": {"node": _none(node), "gpu": gpu, "job": job},
                "explanation": f"{here}: {explanations[i]}",
                "remediation": remediation(cause, row, gpu),
            }
            # One finding per job for job-wide causes (all its nodes show them), else one per node/queue.
            key = (cause, job if cause in _JOB_WIDE and job else (queue or node))
            if key not in findings or findings[key]["probability"] < finding["probability"]:
                findings[key] = finding
    ordered = sorted(findings.values(), key=lambda f: (-f["probability"], f["cause"], str(f["scope"])))
    if not ordered:
        if not wanted:
            wanted = [
                f for i in np.flatnonzero(measured < min_measured) for n in unknown[i] for f in _FAMILIES_OF.get(n, ())
            ]
        needed = tuple(f for f in dict.fromkeys(wanted) if f in missing) or missing
        blind = sorted({c for causes in tree.cannot_tell(X) for c in causes})
        clear = _all_clear(feats, proba, measured, classes, explanations, unsure, needed, min_measured, blind)
        ordered = [_with_profile_caveat(clear, profiled, profile.name)]
    result["findings"] = ordered
    return result


def _with_profile_caveat(finding: dict[str, Any], model: ProfiledRca, profile: str) -> dict[str, Any]:
    """The all-clear (or insufficient) finding naming the causes this profile cannot tell at all, and the
    families that would let it (``ProfiledRca.needs``) with how to enable each."""
    causes = model.cannot_tell(profile)
    if not causes:
        return finding
    parts: list[str] = []
    families: list[str] = []
    fixable: list[str] = []
    sure = model.named_when_sure(profile)
    for cause in causes:
        needs = model.needs(profile, cause)
        notes = (["named only where the model is sure of it"] if cause in sure else []) + (
            [f"needs {', '.join(needs)}"] if needs else []
        )
        parts.append(f"{cause} ({'; '.join(notes)})" if notes else cause)
        families += needs
        fixable += [cause] if needs else []
    text = f"; not (always) diagnosable with the {profile} profile's families: {', '.join(parts)}"
    advice = f" To also diagnose {', '.join(fixable)}, enable {enable_advice(families)}." if families else ""
    return {
        **finding,
        "explanation": finding["explanation"].replace(" → ", f"{text} → ", 1)
        if finding["cause"] == INSUFFICIENT
        else finding["explanation"] + text,
        "remediation": finding["remediation"] + advice,
    }


def _all_clear(
    feats: pd.DataFrame,
    proba: np.ndarray,
    measured: np.ndarray,
    classes: list[str],
    explanations: list[str],
    unsure: list[str],
    missing: tuple[str, ...],
    min_measured: float,
    blind: list[str],
) -> dict[str, Any]:
    """``healthy`` when enough was measured, else ``insufficient_data`` naming what was not; either way the
    causes that the missing families make undiagnosable (``blind``) are named."""
    nobody = {"node": None, "gpu": None, "job": None}
    caveat = f" (cannot be diagnosed without the missing families: {', '.join(blind)})" if blind else ""
    thin = measured < min_measured
    if unsure or thin.mean() > 0.5:
        text = "; ".join(unsure[:3]) or f"{int(thin.sum())} of {len(feats)} candidates were mostly unmeasured"
        return {
            "cause": INSUFFICIENT,
            "probability": round(float(1 - np.median(measured)), 4),
            "scope": nobody,
            "explanation": f"{text}{caveat} → {INSUFFICIENT}",
            "remediation": remediation(INSUFFICIENT, {}, missing=missing),
        }
    h = classes.index(HEALTHY) if HEALTHY in classes else None
    p_healthy = float(proba[:, h].min()) if h is not None else 0.0
    worst = int(np.argmin(proba[:, h])) if h is not None else 0
    worst_queue, worst_node = str(feats["queue"].iloc[worst]), str(feats["node"].iloc[worst])
    where = f"queue={worst_queue}" if worst_queue else f"node={worst_node}"
    return {
        "cause": HEALTHY,
        "probability": round(p_healthy, 4),
        "scope": nobody,
        "explanation": f"{len(feats)} candidates scored healthy{caveat}; least healthy {where}: {explanations[worst]}",
        "remediation": remediation(HEALTHY, {}),
    }
