"""A window of many metric series as ``[time, series]`` matrices, and the counter/ratio helpers on them.

Split from ``models.rca_features`` so the GPU features and the host/Kubernetes/queue features
(``models.rca_context``) share one pivot and one definition of a counter's increase (resets counted as
Prometheus does). Pure: no I/O.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from models.frames import ID, TIME, VALUE

__all__ = ["GPU_PREFIX", "WindowData", "col", "increase", "node_of", "quiet", "rate", "ratio", "sratio"]

_NODE_LABELS = ("Hostname", "hostname", "node", "kubernetes_node", "instance")
GPU_PREFIX = "DCGM_FI_DEV_"
_GPU = GPU_PREFIX


def quiet(fn: Callable[..., np.ndarray], *args: object, **kwargs: object) -> np.ndarray:
    # All-NaN slices are normal here (a missing series); their NaN result is the feature value.
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.asarray(fn(*args, **kwargs), dtype=np.float64)


def node_of(labels: pd.DataFrame) -> np.ndarray:
    """Per series, the node it belongs to, from the first node label present (empty when none)."""
    out = np.full(len(labels), "", dtype=object)
    for name in reversed(_NODE_LABELS):  # first label in the list wins
        if name in labels.columns:
            col = labels[name].fillna("").astype(str).to_numpy()
            if name == "instance":
                col = np.array([c.rsplit(":", 1)[0] for c in col], dtype=object)
            out = np.where(col != "", col, out)
    return out


def col(labels: pd.DataFrame, name: str) -> np.ndarray:
    if name not in labels.columns:
        return np.full(len(labels), "", dtype=object)
    return labels[name].fillna("").astype(str).to_numpy()


@dataclass
class _Table:
    values: np.ndarray  # [T, S]
    labels: pd.DataFrame  # one row per series, positional


class WindowData:
    """A long frame of many metrics, pivoted once to ``[time, series]`` matrices on one time axis."""

    def __init__(self, frame: pd.DataFrame | None = None) -> None:
        self.times = np.zeros(0, dtype=np.int64)
        self.tables: dict[str, _Table] = {}
        self._gpu_cache: dict[str, np.ndarray] = {}
        if frame is None:
            return
        names = (
            frame["__name__"].astype(str)
            if "__name__" in frame.columns
            else frame[ID].astype(str).str.replace(r"\{.*$", "", regex=True)
        )
        stamps = pd.DatetimeIndex(pd.to_datetime(frame[TIME], utc=True)).as_unit("ns").asi8
        self.times, t_index = np.unique(stamps, return_inverse=True)
        label_cols = [c for c in frame.columns if c not in (ID, TIME, VALUE, "__name__")]
        values = frame[VALUE].to_numpy(dtype=np.float64)
        ids = frame[ID].astype(str).to_numpy()
        for name, idx in names.groupby(names.to_numpy(), sort=False).indices.items():
            codes, uniques = pd.factorize(ids[idx])
            m = np.full((len(self.times), len(uniques)), np.nan)
            m[t_index[idx], codes] = values[idx]
            first = np.unique(codes, return_index=True)[1]
            labels = pd.DataFrame(frame[label_cols].iloc[idx[first]]).reset_index(drop=True)
            labels = labels.dropna(axis=1, how="all")
            self.tables[str(name)] = _Table(m, labels)
        self._gpu_keys = self._build_gpu_keys()

    @classmethod
    def from_matrices(cls, times_ns: np.ndarray, tables: dict[str, tuple[np.ndarray, pd.DataFrame]]) -> WindowData:
        """Built directly from ``{metric: ([time, series] values, labels per series)}`` (no long frame)."""
        data = cls()
        data.times = np.asarray(times_ns, dtype=np.int64)
        data.tables = {k: _Table(v, lab.reset_index(drop=True)) for k, (v, lab) in tables.items()}
        data._gpu_keys = data._build_gpu_keys()
        return data

    def _build_gpu_keys(self) -> pd.DataFrame:
        keys = set()
        for name, t in self.tables.items():
            if name.startswith(_GPU) or name.startswith("DCGM_FI_PROF_"):
                keys |= set(zip(node_of(t.labels), col(t.labels, "gpu"), strict=True))
        return pd.DataFrame(sorted(keys), columns=["node", "gpu"])

    def rows(self, t0: int, t1: int) -> slice:
        """Row slice of samples in ``(t0, t1]`` (ns)."""
        return slice(int(np.searchsorted(self.times, t0, "right")), int(np.searchsorted(self.times, t1, "right")))

    def gpu_matrix(self, name: str, rows: slice, held_only: bool = False) -> np.ndarray:
        """``[T, G]`` of a DCGM family over the GPU keys; series of one GPU (pod changes) merged by max.

        ``held_only`` keeps only series with a non-empty ``pod`` label (when the label exists), so a GPU
        whose job ended reads "not measured" instead of "utilisation fell to zero".
        """
        key = f"{name}/held" if held_only else name
        if key not in self._gpu_cache:
            keys = self._gpu_keys
            out = np.full((len(self.times), len(keys)), np.nan)
            t = self.tables.get(name)
            if t is not None and not keys.empty:
                index = pd.MultiIndex.from_frame(keys)
                pos = index.get_indexer(pd.MultiIndex.from_arrays([node_of(t.labels), col(t.labels, "gpu")]))
                if held_only and "pod" in t.labels.columns:
                    pos = np.where(col(t.labels, "pod") != "", pos, -1)
                for s in np.flatnonzero(pos >= 0):
                    out[:, pos[s]] = np.fmax(out[:, pos[s]], t.values[:, s])
            self._gpu_cache[key] = out
        return self._gpu_cache[key][rows]


def increase(m: np.ndarray) -> np.ndarray:
    """Counter increase per column over its samples, counting resets as Prometheus does."""
    d = np.diff(m, axis=0)
    after = m[1:]
    inc = np.where(d >= 0, d, after)  # a drop is a reset: the new value is what was counted since
    return quiet(np.nansum, inc, axis=0) * np.where(np.isfinite(m).sum(axis=0) >= 2, 1.0, np.nan)


def rate(m: np.ndarray, seconds: float) -> np.ndarray:
    return increase(m) / max(seconds, 1.0)


def ratio(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.where(np.asarray(b) > 0, np.asarray(a, dtype=np.float64) / np.asarray(b, dtype=np.float64), np.nan)


def sratio(a: pd.Series, b: pd.Series) -> pd.Series:
    return (a / b.where(b > 0)).astype(np.float64)
