"""``bench.forecast``'s coverage resolution: a trace's coverage is counted per series, and its standard error
resamples whole series (a series' hours are correlated), so a table can say whether a miss is beyond noise."""

from __future__ import annotations

import numpy as np
import pytest

from bench import forecast_report as report


def test_coverage_is_counted_per_series_over_all_its_origins() -> None:
    keys = [("a", 0), ("b", 0), ("a", 1)]
    actual = np.array([[1.0, 5.0, np.nan], [2.0, 2.0, 2.0], [0.0, 1.0, 1.0]])
    lo, hi = np.zeros((3, 3)), np.full((3, 3), 2.0)
    counts = report.coverage_by_series(keys, actual, lo, hi)
    # a: 1 of 2 scored at origin 0 (NaN not scored), 3 of 3 at origin 1; b: 3 of 3
    assert counts.tolist() == [[4.0, 5.0], [3.0, 3.0]]


def test_series_that_agree_have_no_spread_and_series_that_disagree_do() -> None:
    same = np.array([[80.0, 100.0]] * 12)
    assert report.series_bootstrap(same) == pytest.approx(0.0, abs=1e-12)
    split = np.array([[50.0, 100.0]] * 6 + [[100.0, 100.0]] * 6)  # pooled 0.75, half the series at 0.5
    se = report.series_bootstrap(split, draws=4000)
    # the mean of 12 draws from {0.5, 1.0}: s.e. 0.25 / sqrt(12) = 0.072
    assert se == pytest.approx(0.25 / np.sqrt(12), rel=0.08)


def test_one_series_gives_no_standard_error() -> None:
    assert report.series_bootstrap(np.array([[30.0, 40.0]])) == 0.0


def test_series_with_nothing_scored_are_not_evidence() -> None:
    split = np.array([[50.0, 100.0]] * 6 + [[100.0, 100.0]] * 6)
    padded = np.vstack([split, np.zeros((12, 2))])
    assert report.series_bootstrap(padded) == report.series_bootstrap(split)
    assert report.series_bootstrap(np.zeros((5, 2))) == 0.0


def test_a_point_without_a_forecast_is_not_scored() -> None:
    keys = [("a", 0)]
    actual, mean = np.array([[1.0, 5.0]]), np.array([[1.0, np.nan]])
    counts = report.coverage_by_series(keys, actual, np.zeros((1, 2)), np.full((1, 2), 2.0), mean)
    assert counts.tolist() == [[1.0, 1.0]]  # the miss at 5.0 had no forecast, as score() leaves it out


def test_counts_of_the_wrong_shape_are_refused() -> None:
    with pytest.raises(ValueError, match="rows of"):
        report.series_bootstrap(np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="draws"):
        report.series_bootstrap(np.array([[1.0, 2.0], [2.0, 2.0]]), draws=0)
