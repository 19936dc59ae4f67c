"""Conformal intervals whose miscoverage multiplier is tuned per fit, on the fit's own older windows.

Why: the conformal step's windows are not exchangeable with the future, and the traces miss in opposite
directions (one's future errors are smaller than its backtest's, another grows), so no ``gamma`` tuned
across traces suits them all. Here one fit replays its own calibrate-then-apply step (adaptive conformal
inference in spirit, Gibbs & Candès 2021): with backtest windows a day apart, window ``k`` is calibrated on
the ``windows`` rows whose actuals were all known at its origin (rows ``k + gap ...``), and the multiplier
that made those pseudo-out-of-sample bands cover the level, pooled over every series and lead of the fit,
is applied to the served bands. It is one number per fit, like the calibration set of a global model, and
is shrunk toward 1 (in log space) when few windows were scored, so a short history keeps plain CQR.

Layout: every series gives an array ``(rows, horizon)`` of CQR nonconformity scores ``max(lo − y, y − hi)``
of the served combination, row 0 the newest window whose actuals are all known at the served origin, one
row a day older each; NaN where a member or the actual is missing.

Replayed by ``python -m bench.forecast --calibration self`` and by
``bench.experiments.forecast_calibration_sweep``; not what ``auto`` serves (docs/design.md says why).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["MIN_SCORES", "pooled_shift", "self_tuned_gamma"]

MIN_SCORES = 20  # fewer scores than this: the band is left as the members made it (as ``cqr_shift``)
# candidate miscoverages alpha · gamma; the grid is over alpha · gamma, so every level gets the same resolution
_ALPHAS = np.geomspace(0.002, 0.95, 80)


def _shifts(scores: np.ndarray, alphas: np.ndarray) -> np.ndarray | None:
    """The CQR shift (finite-sample adjusted quantile of ``scores``) at each miscoverage in ``alphas``."""
    scores = scores[np.isfinite(scores)]
    if scores.size < MIN_SCORES:
        return None
    prob = np.clip((1 - alphas) * (1 + 1 / scores.size), 0.0, 1.0)
    return np.asarray(np.quantile(scores, prob), dtype=float)


def pooled_shift(rows: np.ndarray, level: int, gamma: float, windows: int) -> float | None:
    """How far to move the served band out (positive) or in: the newest ``windows`` rows of one series."""
    alpha = min((1 - level / 100) * gamma, 0.999)
    got = _shifts(rows[:windows].ravel(), np.array([alpha]))
    return None if got is None else float(got[0])


def self_tuned_gamma(
    per_series: Sequence[np.ndarray], level: int, *, gap: int, windows: int, tests: int, prior: float = 3.0
) -> tuple[float, int]:
    """The fit's miscoverage multiplier for ``level`` and the number of pseudo-test windows behind it.

    Pseudo-test row ``k`` (``k < tests``) is scored against the shift from rows ``k + gap .. k + gap +
    windows − 1`` (only those present). The multiplier whose pooled coverage is nearest the level is
    shrunk toward 1 by ``n / (n + prior)`` in log space, ``n`` the rows scored; 1 when none could be.
    """
    alpha = 1 - level / 100
    hits = np.zeros(_ALPHAS.size)
    count = 0
    scored: set[int] = set()
    for rows in per_series:
        for k in range(min(tests, rows.shape[0])):
            target = rows[k][np.isfinite(rows[k])]
            cal = rows[k + gap : k + gap + windows]
            shift = _shifts(cal.ravel(), _ALPHAS) if target.size and cal.size else None
            if shift is None:
                continue
            hits += (target[None, :] <= shift[:, None]).sum(axis=1)
            count += target.size
            scored.add(k)
    if not count:
        return 1.0, 0
    best = _ALPHAS[int(np.argmin(np.abs(hits / count - level / 100)))] / alpha
    n = len(scored)
    return float(np.exp(n / (n + prior) * np.log(best))), n
