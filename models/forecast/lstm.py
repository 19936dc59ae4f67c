"""A global LSTM forecaster in torch: one network trained over every series at once.

Why global: a single queue has ten weeks of hourly history at best, too little for a deep model per
series, but twelve queues together are enough to learn what persistence, daily rhythm, drains and
recoveries look like. Design choices, each for a reason:

* Per-series scaling (divide by the series' mean demand) so 5-GPU and 500-GPU queues share weights.
* The encoder reads the lookback in day-sized chunks (a 14-step sequence of 24-hour vectors plus an
  observed mask) instead of 336 hourly steps: ~20× cheaper on CPU, and a day is the natural unit here.
* Direct multi-horizon head (all 168 leads at once, MQ-RNN style) conditioned on the origin's calendar
  (hour of day, day of week) and the most recent 24 lags, predicting a residual over the last day's mean —
  persistence is the prior and the network learns departures from it.
* Quantile (pinball) outputs on a fixed grid give the intervals; ``mean`` is the median.
* Loss only on observed targets; time-ordered validation origins drive early stopping; a fixed seed and
  bounded torch threads make fits reproducible and polite on shared machines; CUDA when present.
* Bagging (``bags``, 3 by default): ``bags`` networks, each trained on its own seeded random ``1/bags``
  of the training origins (together the samples of one network: ``auto`` on 1,000 series × 5 weeks took
  203 s wall / 204 s CPU with ``bags=3`` against 193 s / 202 s with one network, same machine,
  ``bench/forecast_speed.py --lstm-bags``), served as the mean of their quantile outputs. Networks trained
  on a dozen queues are high-variance (three seeds of one fit on sim3: 1.023–1.076 of seasonal mean 24's
  MAE; one network's bench score moved by up to 0.10 of the best baseline's MAE between two machines, three
  bagged ones by under 0.01). Three networks cut the LSTM's MAE by 13–15 % on the public traces (same machine)
  (docs/design.md, "Forecasting": the bench trace by trace, and the calibration that came with it).

Warm start (``init_state``, the ``net_.state_dict()`` of an LSTM fitted on other histories, e.g. other
clusters): training starts from those weights instead of random ones, and early stopping starts from them
too, so a fine-tune that does not improve the validation loss keeps the pre-trained network. Measured
leave-one-trace-out (``bench/experiments/forecast_finetune.py``): see docs/design.md, "Forecasting".

Serving (``update``) keeps the trained network frozen and rebuilds only its inputs from the new window:
each series' scale (its mean observed demand in that window), the lookback chunks, the last day and the
origin's calendar, for every series (a global model serves series it was not trained on); ``predict`` is
then one batched forward pass.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from models.forecast.base import BaseForecaster, PointForecast
from models.forecast.prep import ForecastInputError, RegularSeries
from models.forecast.registry import forecasters

__all__ = ["LSTMForecaster"]

_DAY = 24
_TWO_PI = 2 * np.pi
_MIN_VAL_HORIZONS = 3  # a series validates (early stopping) when it has more than this many horizons of origins


class _Net(nn.Module):
    def __init__(self, seq_features: int, static_features: int, hidden: int, horizon: int, n_q: int) -> None:
        super().__init__()
        self.horizon = horizon
        self.n_q = n_q
        self.encoder = nn.LSTM(seq_features, hidden, batch_first=True)
        self.head = nn.Sequential(
            nn.Linear(hidden + static_features, 4 * hidden),
            nn.ReLU(),
            nn.Linear(4 * hidden, horizon * n_q),
        )

    def forward(self, seq: torch.Tensor, static: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
        _, (h, _) = self.encoder(seq)
        out = self.head(torch.cat([h[-1], static], dim=1)).view(-1, self.horizon, self.n_q)
        result: torch.Tensor = out + base.view(-1, 1, 1)
        return result


def _calendar(timestamps_ns: np.ndarray) -> np.ndarray:
    """sin/cos of hour of day and day of week, from int64 epoch nanoseconds (UTC)."""
    hours = timestamps_ns // 3_600_000_000_000
    hod = (hours % 24) / 24
    dow = ((hours // 24 + 3) % 7) / 7  # 1970-01-01 was a Thursday: +3 makes Monday 0
    return np.stack(
        [np.sin(_TWO_PI * hod), np.cos(_TWO_PI * hod), np.sin(_TWO_PI * dow), np.cos(_TWO_PI * dow)], axis=-1
    )


class _Features:
    """Builds (sequence, static, base) inputs and targets for origins of one scaled series."""

    def __init__(
        self,
        series: RegularSeries,
        scale: float,
        lookback: int,
        horizon: int,
        log_scale_range: tuple[float, float] | None = None,
    ) -> None:
        self.values = (series.values / scale).astype(np.float32)
        self.mask = series.observed.astype(np.float32)
        self.lookback = lookback
        self.horizon = horizon
        self.step_ns = int(series.freq.value)
        self.start_ns = int(series.start.value)
        # the scale as a feature (queues of different size behave differently), clipped to what the network
        # was trained on: it extrapolates wildly beyond that (see LSTMForecaster._update_all)
        log_scale = float(np.log1p(scale))
        self.log_scale = float(np.clip(log_scale, *log_scale_range)) if log_scale_range else log_scale
        pad = np.zeros(lookback, dtype=np.float32)
        self._pv = np.concatenate([pad, self.values])
        self._pm = np.concatenate([pad, self.mask])

    def inputs(self, origins: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Origin t forecasts positions t..t+h-1 from everything before t."""
        L = self.lookback
        win_v = np.lib.stride_tricks.sliding_window_view(self._pv, L)[origins]  # = values[t-L:t]
        win_m = np.lib.stride_tricks.sliding_window_view(self._pm, L)[origins]
        days = L // _DAY
        seq = np.concatenate([win_v.reshape(-1, days, _DAY), win_m.reshape(-1, days, _DAY)], axis=2)
        chunk_end = origins[:, None] - 1 - _DAY * np.arange(days - 1, -1, -1)[None, :]
        seq_cal = _calendar(self.start_ns + chunk_end * self.step_ns).astype(np.float32)
        seq = np.concatenate([seq, seq_cal], axis=2)
        last_day = win_v[:, -_DAY:]
        last_mask = win_m[:, -_DAY:]
        base = (last_day * last_mask).sum(1) / np.maximum(last_mask.sum(1), 1)
        week = win_v[:, -7 * _DAY :]
        static = np.concatenate(
            [
                _calendar(self.start_ns + origins * self.step_ns).astype(np.float32),
                last_day,
                week.mean(1, keepdims=True),
                win_m.mean(1, keepdims=True),
                np.full((origins.shape[0], 1), self.log_scale, dtype=np.float32),
            ],
            axis=1,
        )
        return seq.astype(np.float32), static.astype(np.float32), base.astype(np.float32)

    def targets(self, origins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        y = np.lib.stride_tricks.sliding_window_view(self.values, self.horizon)[origins]
        m = np.lib.stride_tricks.sliding_window_view(self.mask, self.horizon)[origins]
        return y, m


def _validation(origins: np.ndarray, length: int, horizon: int) -> np.ndarray:
    """Which origins of a series of ``length`` steps validate: the newest ``horizon`` hours of a long one.

    Validating on short series too (their newest quarter) was tried for speed: on the Alibaba trace, whose
    series are short, the LSTM's MAE went from 7.9 to 14.6 GPUs (``bench/forecast.py --outer 4``): holding
    out a short series' newest hours costs more than early stopping saves. Short histories train
    ``max_epochs`` (40: at 20, Alibaba's LSTM MAE went 7.90 → 8.14, ``auto``'s 7.08 → 7.24).
    """
    if origins.size <= _MIN_VAL_HORIZONS * horizon:
        return np.zeros(origins.size, bool)
    newest: np.ndarray = origins > length - 2 * horizon
    return newest


def _window_scale(series: RegularSeries) -> float:
    """The mean observed demand, at least 1: what one unit of the network's output is worth for a series."""
    observed = series.values[series.observed]
    return max(float(observed.mean()), 1.0) if observed.size else 1.0


def _pinball(pred: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    diff = y.unsqueeze(-1) - pred
    loss = torch.maximum(q * diff, (q - 1) * diff) * mask.unsqueeze(-1)
    return loss.sum() / (mask.sum() * q.shape[0]).clamp(min=1)


@forecasters.register("lstm")
class LSTMForecaster(BaseForecaster):
    """Global quantile LSTM (see the module docstring). ``predict(h)`` needs ``h ≤ horizon``."""

    # auto backtests it once, at the newest origin (models.forecast.memberwise); bench: models.forecast.frozen
    backtest_frozen: ClassVar[bool] = True

    def __init__(
        self,
        horizon: int = 168,
        lookback_days: int = 14,
        hidden_size: int = 64,
        quantiles: Sequence[float] = (0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.975),
        max_epochs: int = 40,
        patience: int = 3,
        batch_size: int = 256,
        learning_rate: float = 3e-3,
        sample_stride: int = 1,
        max_samples: int = 20_000,
        random_state: int = 0,
        num_threads: int | None = None,
        device: str = "auto",
        freq: str = "1h",
        init_state: dict[str, torch.Tensor] | None = None,
        bags: int = 3,
    ) -> None:
        self.bags = bags
        self.horizon = horizon
        self.lookback_days = lookback_days
        self.hidden_size = hidden_size
        self.quantiles = quantiles
        self.max_epochs = max_epochs
        self.patience = patience
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.sample_stride = sample_stride
        self.max_samples = max_samples
        self.random_state = random_state
        self.num_threads = num_threads
        self.device = device
        self.freq = freq
        self.init_state = init_state

    # sample_stride=1 (every hour an origin) on purpose: stride 2 halved the fit time on Philly but the
    # backtest MASE went 0.905 → 0.977 and 80 % coverage 68 % → 51 %.
    # max_samples bounds memory and epoch time when there are many series (1,000 series × 5 weeks is
    # ~650k hourly origins, ~3 GB of inputs): beyond it a seeded random subset of origins is kept, spread
    # over every series. The benchmark traces (≤ 18k origins) stay below it and are trained on in full.

    def min_history(self) -> int:
        return int(self.horizon) + _DAY

    def _device(self) -> torch.device:
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)

    def _threads(self) -> int:
        # One intra-op thread by default: measured on the shared 2-core CI box under load, a fit took 38 s
        # with 1 thread and 470 s with 2 (OpenMP workers spin against each other and other jobs).
        return int(self.num_threads or 1)

    def _fit_all(self, series: list[RegularSeries]) -> dict[str, Any]:
        q = np.asarray(sorted(self.quantiles), dtype=np.float32)
        if not (0.5 in q and ((q > 0) & (q < 1)).all()):
            raise ForecastInputError("LSTM quantiles must lie in (0, 1) and include 0.5")
        bags = getattr(self, "bags", 1)
        if isinstance(bags, bool) or not isinstance(bags, int | np.integer) or bags < 1:
            raise ForecastInputError(f"LSTM bags must be a whole number of networks ≥ 1, not {bags!r}")
        lookback = int(self.lookback_days) * _DAY
        horizon = int(self.horizon)
        scales = {s.series_id: max(float(s.values[s.observed].mean()), 1.0) for s in series}
        parts: dict[str, list[np.ndarray]] = {k: [] for k in ("seq", "static", "base", "y", "m", "val")}
        features = {}
        stride = int(self.sample_stride)
        total = sum(max(0, -(-(len(s) - horizon + 1 - _DAY) // stride)) for s in series)
        keep = min(1.0, int(self.max_samples) / max(total, 1))
        subsample = np.random.default_rng(int(self.random_state))
        for s in series:
            feats = _Features(s, scales[s.series_id], lookback, horizon)
            features[s.series_id] = feats
            origins = np.arange(_DAY, len(s) - horizon + 1, stride)
            val = _validation(origins, len(s), horizon)
            if keep < 1:
                chosen = subsample.random(origins.size) < keep
                origins, val = origins[chosen], val[chosen]
            if origins.size == 0:
                continue
            seq, static, base = feats.inputs(origins)
            y, m = feats.targets(origins)
            for key, arr in zip(parts, (seq, static, base, y, m, val), strict=True):
                parts[key].append(arr)
        if not parts["seq"]:
            raise ForecastInputError(f"LSTM needs a series with at least {self.min_history()} steps")
        data = {k: np.concatenate(v) for k, v in parts.items()}
        previous_threads = torch.get_num_threads()
        torch.set_num_threads(self._threads())
        try:
            nets = [self._train(part, q, int(self.random_state) + b) for b, part in enumerate(self._bagged(data))]
        finally:
            torch.set_num_threads(previous_threads)
        self.nets_ = nets
        self.net_ = nets[0]  # the first network (warm starts and older callers read one network)
        self.epochs_ = sum(self.epochs_by_bag_)
        self.best_val_loss_ = float(np.mean(self.best_val_loss_by_bag_))
        self.scales_ = scales
        logs = [f.log_scale for f in features.values()]
        self.log_scale_range_ = (min(logs), max(logs))
        self.quantiles_ = q
        self.last_inputs_ = {sid: f.inputs(np.array([len(f.values)])) for sid, f in features.items()}
        return {sid: None for sid in scales}

    def _bagged(self, data: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
        """The training samples of each network: all of them for one, else a seeded random ``1/bags`` each
        (disjoint, so the networks see different origins and together every one)."""
        self.epochs_by_bag_: list[int] = []
        self.best_val_loss_by_bag_: list[float] = []
        n = data["seq"].shape[0]
        bags = min(int(getattr(self, "bags", 1)), n)
        if bags <= 1:
            return [data]
        which = np.random.default_rng(int(self.random_state)).permutation(n) % bags
        parts = [{k: v[which == b] for k, v in data.items()} for b in range(bags)]
        # never a network without a training sample (on a tiny history a share can hold validation origins only)
        trained = [p for p in parts if not p["val"].astype(bool).all()]
        return trained or [data]

    def _train(self, data: dict[str, np.ndarray], q: np.ndarray, seed: int) -> _Net:
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        device = self._device()
        val = data["val"].astype(bool)
        tensors = {k: torch.from_numpy(v) for k, v in data.items() if k != "val"}
        train_idx = np.flatnonzero(~val)
        val_idx = np.flatnonzero(val)
        net = _Net(data["seq"].shape[2], data["static"].shape[1], int(self.hidden_size), int(self.horizon), q.size)
        if self.init_state is not None:  # warm start: fine-tune a network pre-trained on other histories
            try:
                net.load_state_dict(self.init_state)
            except RuntimeError as exc:
                raise ForecastInputError(
                    "LSTM init_state does not fit this network (horizon, hidden_size and the quantile grid "
                    f"quantiles must match the pre-trained one's): {str(exc).splitlines()[-1].strip()}"
                ) from exc
        net.to(device)
        qt = torch.from_numpy(q).to(device)
        optimiser = torch.optim.Adam(net.parameters(), lr=float(self.learning_rate))

        def batch(idx: np.ndarray) -> list[torch.Tensor]:
            ix = torch.from_numpy(idx)
            return [tensors[k][ix].to(device) for k in ("seq", "static", "base", "y", "m")]

        best_loss, best_state, stale = float("inf"), copy.deepcopy(net.state_dict()), 0
        epochs = 0
        for _epoch in range(int(self.max_epochs)):
            epochs += 1
            net.train()
            order = rng.permutation(train_idx)
            for start in range(0, order.size, int(self.batch_size)):
                seq, static, base, y, m = batch(order[start : start + int(self.batch_size)])
                optimiser.zero_grad()
                loss = _pinball(net(seq, static, base), y, m, qt)
                loss.backward()  # type: ignore[no-untyped-call]
                nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                optimiser.step()
            if val_idx.size == 0:
                best_state = copy.deepcopy(net.state_dict())
                continue
            net.eval()
            with torch.no_grad():
                seq, static, base, y, m = batch(val_idx)
                val_loss = float(_pinball(net(seq, static, base), y, m, qt))
            if val_loss < best_loss - 1e-5:
                best_loss, best_state, stale = val_loss, copy.deepcopy(net.state_dict()), 0
            else:
                stale += 1
                if stale >= int(self.patience):
                    break
        net.load_state_dict(best_state)
        self.best_val_loss_by_bag_.append(best_loss)
        self.epochs_by_bag_.append(epochs)
        return net.cpu().eval()

    def _update_all(self, series: list[RegularSeries]) -> dict[str, Any]:
        """Serving: the frozen network's inputs from the new window (per-series scale, lags, calendar)."""
        lookback = int(self.lookback_days) * _DAY
        scales = {s.series_id: _window_scale(s) for s in series}
        self.scales_ = scales
        # a series larger (or smaller) than any trained on is served as the nearest trained scale: on Alibaba a
        # queue ~75× the others, too short when the network was trained, was forecast ~680 GPUs high
        # with its own scale as input
        trained = getattr(self, "log_scale_range_", None)  # None: a model pickled before the range was kept
        self.last_inputs_ = {
            s.series_id: _Features(s, scales[s.series_id], lookback, int(self.horizon), trained).inputs(
                np.array([len(s)])
            )
            for s in series
        }
        return {sid: None for sid in scales}

    def _predict_all(self, horizon: int, levels: tuple[int, ...]) -> dict[str, PointForecast]:
        if horizon > int(self.horizon):
            raise ForecastInputError(f"this LSTM was trained for {self.horizon} steps; asked for {horizon}")
        sids = list(self.last_inputs_)
        seq = torch.from_numpy(np.concatenate([self.last_inputs_[s][0] for s in sids]))
        static = torch.from_numpy(np.concatenate([self.last_inputs_[s][1] for s in sids]))
        base = torch.from_numpy(np.concatenate([self.last_inputs_[s][2] for s in sids]))
        previous_threads = torch.get_num_threads()
        torch.set_num_threads(self._threads())
        try:
            with torch.no_grad():
                nets = getattr(self, "nets_", None) or [self.net_]  # a model stored before bagging has one
                out = np.mean([net(seq, static, base).numpy().astype("float64") for net in nets], axis=0)
        finally:
            torch.set_num_threads(previous_threads)
        out = np.sort(out, axis=2)  # quantile heads can cross; sorting restores a valid distribution
        qs: np.ndarray = out[:, :horizon] * np.array([self.scales_[sid] for sid in sids])[:, None, None]
        grid = self.quantiles_.astype("float64")

        def at(p: float) -> np.ndarray:
            """Probability ``p`` interpolated linearly on the quantile grid (``np.interp``, every row at once)."""
            if p <= grid[0] or p >= grid[-1]:
                edge: np.ndarray = qs[:, :, 0 if p <= grid[0] else -1]
                return edge
            j = int(np.searchsorted(grid, p, side="right")) - 1
            t = (p - grid[j]) / (grid[j + 1] - grid[j])
            inner: np.ndarray = qs[:, :, j] + t * (qs[:, :, j + 1] - qs[:, :, j])
            return inner

        mean = at(0.5)
        bands = {lvl: (at(0.5 - lvl / 200), at(0.5 + lvl / 200)) for lvl in levels}
        return {sid: (mean[i], {lvl: (lo[i], hi[i]) for lvl, (lo, hi) in bands.items()}) for i, sid in enumerate(sids)}
