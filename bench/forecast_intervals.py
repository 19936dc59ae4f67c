"""``auto``'s served intervals replayed on benchmark records: how ``python -m bench.forecast --calibration`` bands.

``fresh`` is what ``auto`` serves (``models.forecast.memberwise``: every member's bands on its own backtest
errors, the LSTM's on its newest window only, by a network trained there and in units of that window's band,
then weighted like the means); ``fresh-abs`` the same with the LSTM's shift in GPUs (an earlier design);
``weekly`` is what ``auto`` served before (two-sided CQR on its inner windows a week apart, at miscoverage
``(1 − L) · gamma``); ``daily`` calibrates on the ``DAILY`` newest windows a day apart whose actuals all
precede the origin (the newest ``GAP`` days back); ``self`` multiplies ``gamma`` by the multiplier one fit
gives itself (``bench.experiments.forecast_selftune``): pooled over every series served at that origin, from
up to ``TESTS`` of its own older windows, each calibrated the same way on the windows before it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.experiments.forecast_selftune import pooled_shift, self_tuned_gamma
from models.forecast.base import _tidy
from models.forecast.memberwise import scaled_shift
from models.forecast.selection import cqr_shift

__all__ = ["DAILY", "GAP", "TESTS", "calibrated", "fit_gammas"]

GAP, DAILY, TESTS = 168 // 24, 7, 7  # bench.forecast: horizon 168 h, a new origin every 24 h


def fit_gammas(rep: dict[str, Any], how: str) -> dict[tuple[int, int], float]:
    """Per (level, origin): the multiplier one ``auto`` fit at that origin gives itself (1 unless ``self``),
    pooled over every series it serves there, as ``bench.experiments.forecast_selftune`` does."""
    out: dict[tuple[int, int], float] = {}
    levels = tuple(rep["bands"])
    if how != "self":
        return out
    origins = sorted({o for _, o in rep["key"]})
    for lvl in levels:
        for o in origins:
            rows = [r for (_, oo), r in zip(rep["key"], rep["rows"][lvl], strict=True) if oo == o]
            out[lvl, o] = self_tuned_gamma(rows, lvl, gap=GAP, windows=DAILY, tests=TESTS)[0]
    return out


def _memberwise(
    members: dict[str, Any], lvl: int, gamma: float, relative: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    lo: Any = 0.0
    hi: Any = 0.0
    for wt, bands, scores, calib_half in members.values():
        if relative and calib_half is not None:  # scaled to the served band, never up (models.forecast.memberwise)
            q = scaled_shift(scores[lvl], lvl, gamma, calib_half[lvl], bands[lvl])
        else:
            q = cqr_shift(scores[lvl], lvl, gamma)
        q = 0.0 if q is None else q
        lo, hi = lo + wt * (bands[lvl][0] - q), hi + wt * (bands[lvl][1] + q)
    return np.asarray(lo), np.asarray(hi)


def calibrated(rep: dict[str, Any], gamma: float, how: str = "weekly") -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """The served bands: CQR on the inner weekly windows (``weekly``, what auto ships), or on the ``DAILY``
    newest daily ones (``daily``), times the fit's own multiplier (``self``)."""
    levels = tuple(rep["bands"])
    bands: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = {lvl: ([], []) for lvl in levels}
    own = fit_gammas(rep, how)
    for i, mean in enumerate(rep["mean"]):
        raw = {}
        for lvl in levels:
            lo, hi = rep["bands"][lvl][i]
            if how in ("fresh", "fresh-abs"):  # every member on its own errors, weighted (models.forecast.memberwise)
                raw[lvl] = _memberwise(rep["members"][i], lvl, gamma, relative=how == "fresh")
                continue
            if how == "weekly":
                q = cqr_shift(rep["scores"][lvl][i], lvl, gamma)
            else:
                q = pooled_shift(rep["rows"][lvl][i], lvl, gamma * own.get((lvl, rep["key"][i][1]), 1.0), DAILY)
            raw[lvl] = (lo - q, hi + q) if q is not None else (lo, hi)
        _, tidy = _tidy(mean, raw, levels, fallback=float(mean[0]))
        for lvl in levels:
            bands[lvl][0].append(tidy[lvl][0])
            bands[lvl][1].append(tidy[lvl][1])
    return {lvl: (np.array(lo), np.array(hi)) for lvl, (lo, hi) in bands.items()}
