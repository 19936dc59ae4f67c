"""Dynamic thresholds: k-of-n flags on a level shift, band gauges on /metrics, and the example alert rule."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from predictor.diagnose.bands import export_forecast_bands
from predictor.errors import InputError
from tests.support.anomaly import AnomalyInputError, band_flags

RULES = Path(__file__).resolve().parents[2] / "examples" / "alerts" / "forecast-bands.yaml"
T = pd.date_range("2026-03-02", periods=48, freq="1h", tz="UTC")


def _frames(shift_at: int = 30) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(3)
    value = 100 + rng.normal(0, 2, T.size)
    value[shift_at:] += 25  # an injected level shift the forecast did not expect
    history = pd.DataFrame({"series_id": "cluster", "timestamp": T, "value": value})
    forecast = pd.DataFrame(
        {
            "series_id": "cluster",
            "timestamp": T,
            "mean": 100.0,
            "lo-80": 95.0,
            "hi-80": 105.0,
            "lo-95": 92.0,
            "hi-95": 108.0,
        }
    )
    return history, forecast


def test_level_shift_is_flagged_after_k_of_n_steps() -> None:
    history, forecast = _frames()
    flags = band_flags(history, forecast, level=80, k=3, n=5)
    first = flags.index[flags["flag"]].min()
    assert first == 32  # third step outside the band after the shift at 30
    assert not flags.loc[:29, "flag"].any()
    assert flags.loc[32:, "flag"].all() and (flags.loc[30:, "outside"] == 1).all()


def test_single_outliers_do_not_flag() -> None:
    history, forecast = _frames(shift_at=48)
    history.loc[[5, 20, 40], "value"] = 150.0
    assert not band_flags(history, forecast, k=2, n=4)["flag"].any()


def test_bad_settings_and_frames_are_named() -> None:
    history, forecast = _frames()
    with pytest.raises(AnomalyInputError, match="k <= n"):
        band_flags(history, forecast, k=6, n=5)
    with pytest.raises(AnomalyInputError, match="hi-90"):
        band_flags(history, forecast, level=90)


def test_band_gauges_follow_the_current_step_and_drop_vanished_series() -> None:
    registry = CollectorRegistry()
    _, forecast = _frames()
    other = forecast.assign(series_id='queue{queue_name="a"}', **{"hi-80": 7.0, "lo-80": 3.0})
    n = export_forecast_bands(registry, pd.concat([forecast, other]), at=T[10] + pd.Timedelta(minutes=30))
    assert n == 2
    text = generate_latest(registry).decode()
    assert 'predictor_forecast_upper{level="80",series="cluster"} 105.0' in text
    assert 'predictor_forecast_lower{level="80",series="queue{queue_name=\\"a\\"}"} 3.0' in text
    export_forecast_bands(registry, forecast, at=T[11])  # a newer forecast without the queue
    text = generate_latest(registry).decode()
    assert "queue_name" not in text and 'series="cluster"' in text
    with pytest.raises(InputError, match="lo-50"):
        export_forecast_bands(registry, forecast, level=50, at=T[0])


needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")


@needs_promtool
def test_example_rule_passes_promtool_check() -> None:
    done = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_example_rule_fires_on_a_level_shift(tmp_path: Path) -> None:
    # promtool's rule unit tests evaluate the real rule file: queue a's demand jumps from 10 to 40 GPUs at
    # minute 11 ('10000x10' is 11 samples) against its upper band of 20; the third step above it (minute 13)
    # fires for queue a only. Queue b stays inside its band; the band's `series` is the queue name.
    test = tmp_path / "test.yaml"
    test.write_text(f"""
rule_files: [{RULES}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'volcano_queue_request_scalar_resources{{queue_name="a",resource="nvidia.com/gpu"}}'
        values: '10000x10 40000x20'
      - series: 'volcano_queue_request_scalar_resources{{queue_name="b",resource="nvidia.com/gpu"}}'
        values: '10000x30'
      - series: 'predictor_forecast_upper{{series="a",level="80"}}'
        values: '20x30'
      - series: 'predictor_forecast_lower{{series="a",level="80"}}'
        values: '5x30'
      - series: 'predictor_forecast_upper{{series="b",level="80"}}'
        values: '20x30'
      - series: 'predictor_forecast_lower{{series="b",level="80"}}'
        values: '5x30'
    alert_rule_test:
      - eval_time: 12m
        alertname: GpuDemandAboveForecastBand
        exp_alerts: []
      - eval_time: 13m
        alertname: GpuDemandAboveForecastBand
        exp_alerts:
          - exp_labels: {{severity: warning, queue_name: a}}
            exp_annotations:
              summary: GPU demand of queue a above its forecast band
              description: >-
                GPU demand was above the 80 % forecast band in 3 of the last 5 minutes: a level shift the
                forecaster did not expect (new workload, quota change, or a retraining backlog).
      - eval_time: 13m
        alertname: GpuDemandBelowForecastBand
        exp_alerts: []
""")
    done = subprocess.run(["promtool", "test", "rules", str(test)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
