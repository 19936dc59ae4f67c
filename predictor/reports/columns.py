"""The queue table's columns and the one number formatter that Markdown and HTML share.

Both human-facing formats read these, so a heading or a rounding cannot differ between the HTML a manager
opens and the Markdown in a pull request. A module of its own so that neither renderer imports the other.
"""

from __future__ import annotations

__all__ = ["QUEUE_COLUMNS", "fmt", "kwh"]

# (field, heading, kind): the one column list Markdown and HTML tables use.
QUEUE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("queue", "queue", "text"),
    ("resource", "GPU type", "text"),
    ("guarantee", "guarantee", "gpu"),
    ("deserved", "deserved", "gpu"),
    ("capability", "capability", "gpu"),
    ("allocated_mean", "allocated mean", "gpu"),
    ("allocated_p95", "allocated p95", "gpu"),
    ("used_mean", "used mean", "gpu"),
    ("used_p95", "used p95", "gpu"),
    ("forecast_p50", "forecast p50", "gpu"),
    ("forecast_p90", "forecast p90", "gpu"),
    ("recommended_deserved", "recommended deserved", "gpu"),
    ("recommended_capability", "recommended capability", "gpu"),
    ("quota_utilisation", "quota utilisation now", "pct"),
    ("expected_utilisation", "expected utilisation", "pct"),
    ("idle_quota_gpu_h", "idle quota GPU-h", "gpu"),
    ("status", "status", "text"),
    ("confidence", "confidence", "text"),
    ("coverage", "coverage", "pct"),
)


def fmt(value: object, kind: str = "gpu") -> str:
    """One formatter for every human-facing format: GPUs with one decimal, ratios as whole percents."""
    if value is None:
        return "n/a"
    if isinstance(value, float | int) and not isinstance(value, bool):
        if kind == "pct":
            return f"{100 * float(value):.0f} %"
        return f"{float(value):,.1f}"
    return str(value)


def kwh(value: float | None) -> str:
    """Energy in kWh with one decimal, for the energy section of Markdown and HTML."""
    return "n/a" if value is None else f"{value:.1f}"
