"""Constants of the small simulated cluster the demand tests share (imported by conftest and tests)."""

from __future__ import annotations

import pandas as pd

START = pd.Timestamp("2026-03-02", tz="UTC")
FAMILIES = "DCGM_FI_DEV_GPU_UTIL,DCGM_FI_DEV_FB_USED,kube_pod_container_resource_requests,kube_pod_labels"
