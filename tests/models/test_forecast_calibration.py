"""The self-tuned conformal multiplier: bands widen when errors grow after the calibration windows and
narrow when they shrink, and a fit with little evidence keeps plain CQR (``models.forecast.calibration``)."""

from __future__ import annotations

import numpy as np
import pytest

from models.forecast.calibration import pooled_shift, self_tuned_gamma

H, ROWS, GAP, WINDOWS, TESTS = 48, 16, 2, 3, 7


def _scores(drift: float, series: int = 4, seed: int = 0) -> list[np.ndarray]:
    """CQR scores of a band of half-width 1 around an unbiased mean, rows newest first: the error scale of
    row k is ``exp(-drift · k)``, so a positive ``drift`` means errors grew toward the present."""
    rng = np.random.default_rng(seed)
    scale = np.exp(-drift * np.arange(ROWS))[:, None]
    return [np.abs(rng.normal(size=(ROWS, H))) * scale - 1.0 for _ in range(series)]


def _coverage(rows: np.ndarray, shift: float) -> float:
    return float(np.mean(rows <= shift))


@pytest.mark.parametrize("level", [80, 95])
def test_growing_errors_widen_and_shrinking_errors_narrow(level: int) -> None:
    growing, shrinking, steady = _scores(0.15), _scores(-0.15), _scores(0.0)
    g_grow, n = self_tuned_gamma(growing, level, gap=GAP, windows=WINDOWS, tests=TESTS)
    g_shrink, _ = self_tuned_gamma(shrinking, level, gap=GAP, windows=WINDOWS, tests=TESTS)
    g_steady, _ = self_tuned_gamma(steady, level, gap=GAP, windows=WINDOWS, tests=TESTS)
    assert n == TESTS
    assert g_grow < 0.8 < 1.25 < g_shrink  # < 1 widens, > 1 narrows
    assert 0.7 < g_steady < 1.4  # exchangeable windows: about plain CQR
    # the served band: on a future that keeps drifting, the tuned one covers nearer the level than plain CQR
    # the served window is GAP days newer than row 0: its errors have grown by exp(0.15 · GAP)
    future = np.abs(np.random.default_rng(1).normal(size=(20, H))) * np.exp(0.15 * GAP) - 1.0
    rows = growing[0]
    plain = pooled_shift(rows, level, 1.0, WINDOWS)
    tuned = pooled_shift(rows, level, g_grow, WINDOWS)
    assert plain is not None and tuned is not None and tuned > plain
    assert abs(_coverage(future, tuned) - level / 100) < abs(_coverage(future, plain) - level / 100)


def test_thin_evidence_keeps_plain_cqr() -> None:
    growing = _scores(0.15)
    g_all, _ = self_tuned_gamma(growing, 80, gap=GAP, windows=WINDOWS, tests=TESTS)
    g_one, n_one = self_tuned_gamma(growing, 80, gap=GAP, windows=WINDOWS, tests=1)
    assert n_one == 1 and g_all < g_one < 1.0  # one window scored: shrunk most of the way back to 1
    # too short to calibrate any pseudo-test (nothing GAP rows older): exactly plain CQR
    short = [rows[: GAP + 0] for rows in growing]
    assert self_tuned_gamma(short, 80, gap=GAP, windows=WINDOWS, tests=TESTS) == (1.0, 0)
    assert pooled_shift(growing[0][:1, :10], 80, 1.0, WINDOWS) is None  # 10 scores: band left alone
