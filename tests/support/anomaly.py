"""Dynamic thresholds: a forecaster's interval band turned into anomaly flags (k of the last n steps).

A fixed threshold ("alert at 90 % GPUs busy") is wrong twice a day on a seasonal series; the forecast band
already says what is normal *for this hour*. One point outside the band is noise (the band is an 80 or
95 % interval, so 5-20 % of points fall outside by design); ``k`` of the last ``n`` steps outside is a
level shift worth a look. Pure pandas: history and forecast frames in, flags out.

This is the reference for the k-of-n rule that the alert rules (``examples/alerts/forecast-bands.yaml``,
``k8s/base/monitoring/prometheusrule.yaml``) evaluate in PromQL; the runtime exports only the band
(``predictor.diagnose.bands``), so the rule's Python form lives with its tests.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from models.frames import ID, TIME, VALUE

__all__ = ["AnomalyInputError", "band_flags"]


class AnomalyInputError(ValueError):
    """The frames or the k-of-n settings cannot be used."""


def band_flags(
    history: pd.DataFrame, forecast: pd.DataFrame, *, level: int = 80, k: int = 3, n: int = 5
) -> pd.DataFrame:
    """Per (series, timestamp) in both frames: the band, whether the value is outside, and the k-of-n flag.

    Columns: ``series_id, timestamp, value, mean, lower, upper, outside`` (-1 below, +1 above, 0 inside)
    and ``flag`` (True once at least ``k`` of the last ``n`` steps of that series were outside).
    """
    if not 1 <= k <= n:
        raise AnomalyInputError(f"need 1 <= k <= n, got k={k}, n={n}")
    lo, hi = f"lo-{level}", f"hi-{level}"
    for frame, name, needed in ((history, "history", (ID, TIME, VALUE)), (forecast, "forecast", (ID, TIME, lo, hi))):
        missing = [c for c in needed if c not in frame.columns]
        if missing:
            raise AnomalyInputError(f"{name} frame lacks column(s) {', '.join(missing)}")
    band = forecast[[ID, TIME, *(["mean"] if "mean" in forecast.columns else []), lo, hi]]
    joined = history[[ID, TIME, VALUE]].merge(band, on=[ID, TIME], how="inner").sort_values([ID, TIME])
    joined = joined.rename(columns={lo: "lower", hi: "upper"}).reset_index(drop=True)
    if "mean" not in joined.columns:
        joined["mean"] = np.nan
    value = joined[VALUE].to_numpy(dtype=np.float64)
    joined["outside"] = np.where(value > joined["upper"], 1, np.where(value < joined["lower"], -1, 0))
    hits = (joined["outside"] != 0).astype(np.int64)
    joined["flag"] = hits.groupby(joined[ID]).transform(lambda s: s.rolling(n, min_periods=1).sum()) >= k
    return joined[[ID, TIME, VALUE, "mean", "lower", "upper", "outside", "flag"]]
