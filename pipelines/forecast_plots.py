"""The pictures logged with every ``gpu-forecast`` version: a fan chart and the per-series backtest MASE.

Apart from the training job because only it draws, and matplotlib is imported lazily, headless, so the
other forecast operations (``forecast``, ``backtest``) never pay for it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from models.frames import ID, TIME, VALUE

__all__ = ["forecast_plots"]


def forecast_plots(
    history: pd.DataFrame, forecast: pd.DataFrame, per_series: pd.DataFrame, directory: Path
) -> list[Path]:
    """A fan chart of the largest series and the per-series MASE bars (PNG files to log)."""
    import matplotlib

    matplotlib.use("Agg")  # headless: training runs in CronJobs
    import matplotlib.pyplot as plt

    paths = []
    top = history.groupby(ID)[VALUE].mean().sort_values(ascending=False).index[:4]
    fig, axes = plt.subplots(len(top), 1, figsize=(10, 2.6 * len(top)), squeeze=False)
    for ax, sid in zip(axes[:, 0], top, strict=False):
        past = history[history[ID] == sid].tail(24 * 21)
        fut = forecast[forecast[ID] == sid]
        ax.plot(past[TIME], past[VALUE], color="black", lw=0.8, label="history")
        ax.plot(fut[TIME], fut["mean"], color="tab:blue", lw=1.0, label="forecast")
        for lvl, alpha in ((95, 0.15), (80, 0.3)):
            if f"lo-{lvl}" in fut:
                ax.fill_between(fut[TIME], fut[f"lo-{lvl}"], fut[f"hi-{lvl}"], color="tab:blue", alpha=alpha, lw=0)
        ax.set_title(str(sid), fontsize=9)
        ax.set_ylabel("GPUs")
    fig.tight_layout()
    paths.append(directory / "forecast_fan.png")
    fig.savefig(paths[-1], dpi=80)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(per_series) + 1.5))
    ax.barh(per_series[ID].astype(str), per_series["mase"])
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("backtest MASE (1 = in-sample weekly seasonal naive)")
    fig.tight_layout()
    paths.append(directory / "backtest_mase.png")
    fig.savefig(paths[-1], dpi=80)
    plt.close(fig)
    return paths
