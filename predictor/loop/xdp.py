"""The loop drives XDP: per node, forecast network load and read the job mix, choose a profile, publish inputs.

Each cycle (``XdpLoop.run``), for every node with network history:

1. **Forecast.** Each (node, device, direction) series of hourly bits per second is forecast with
   ``seasonal_mean_24`` (``models.forecast.windows.SeasonalWindowForecaster``): each hour of the day is
   the mean of that hour over the last 7 days, with the series' own past errors as bands. It has no
   parameters to fit, so serving it is the same computation as "training" it and nothing is refitted or
   searched inside the loop; no network-load model is trained or registered, and the daily rhythm of
   data loading is what a link-load forecast an hour ahead needs. A target's load is the upper 80 % band
   of the coming hour, the larger of receive and transmit. A node whose exporter reports none of the
   target devices (bonded or unexported NICs) has its total over the devices it reports split evenly over
   the targets.
2. **Job mix.** From kube-state-metrics: the running GPU pods on each node, their Volcano job and queue.
   A job whose pods run on more than one node is distributed; its GPUs on the node over the node's
   allocatable GPUs are the node's ``distributed_share``. No signal marks data-loading jobs, so
   ``ingest_share`` stays 0 (the policy does not use it yet either).
3. **Profile.** ``predictor.planner.xdp_profiles.choose_profile`` (the agent's own pure policy, with the
   profile chosen last cycle as ``current``, so the dead band applies the same way); it is shown on
   ``/metrics`` as ``predictor_xdp_profile{node,profile} 1``. The agent chooses again from the same inputs
   with its own knobs and its datapath's current profile, which is what it applies.
4. **Publish.** One inputs document per node (the agent's ``ForecastInputs`` schema, validated here): in
   plan mode ``<plan_dir>/xdp/<node>.json``; in server-dry-run and apply modes the agents' ConfigMap, one
   merge patch (dry-run: ``dryRun=All``). ``<plan_dir>/xdp/_profiles.json`` holds the chosen profiles.
   A cycle with inputs for no node at all (the exporters went missing) publishes nothing: the agents keep
   the last inputs, and hold once those are stale.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from prometheus_client import CollectorRegistry, Gauge

from models.frames import ID, TIME, VALUE
from predictor.actuators.xdp_agent import ForecastInputs, TargetInput
from predictor.atomicio import child_path, fsync_directory, write_text
from predictor.config import XdpLoopSettings
from predictor.errors import PredictorError
from predictor.loop.xdp_io import XdpPublisher, XdpSource
from predictor.names import is_dns1123_subdomain
from predictor.planner.xdp_profiles import JobMix, TargetLoad, XdpPolicy, choose_profile
from predictor.planner.xdp_types import Profile

__all__ = ["NETWORK_FORECASTER", "NodeXdp", "XdpLoop", "XdpReport", "forecast_target_load", "job_mix"]

NETWORK_FORECASTER = "seasonal_mean_24"  # models.forecast registry name; parameter-free (see the docstring)
BAND = "hi-80"
MIN_HOURS = 24  # the seasonal mean needs one full day
PROFILES = "_profiles.json"  # the chosen profile per node, beside the inputs ("_" is in no node name)


@dataclass(frozen=True)
class NodeXdp:
    """One node's published inputs and the profile the policy chose from them."""

    node: str
    inputs: ForecastInputs
    profile: Profile


@dataclass
class XdpReport:
    """What the XDP part of a cycle did."""

    nodes: list[NodeXdp] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # node → why it got no inputs
    published: str = ""
    error: str = ""
    forecaster: str = f"{NETWORK_FORECASTER} ({BAND} of the next hour, parameter-free)"


def _hourly_link_load(network: pd.DataFrame, targets: Sequence[str], now: pd.Timestamp) -> pd.DataFrame:
    """node, device, hour, value: each target's busier direction per hour (device ``*``: the node's total)."""
    frame = network.loc[network[TIME] <= now].dropna(subset=[VALUE]).reset_index(drop=True)
    frame = frame.assign(
        node=frame["node"].astype(str), device=frame["device"].astype(str), hour=frame[TIME].dt.floor("h")
    )
    own = frame["device"].isin(list(targets))
    reports_targets = own.groupby(frame["node"]).transform("any")
    # A node that exports none of the target devices: every device it reports, summed.
    frame = frame.loc[own | ~reports_targets]
    frame = frame.assign(device=frame["device"].where(reports_targets.loc[frame.index], "*"))
    per_direction = frame.groupby(["node", "device", "direction", "hour"], as_index=False, sort=False)[VALUE].sum()
    # The link's load is its busier direction, taken hour by hour before forecasting.
    busier: pd.DataFrame = per_direction.groupby(["node", "device", "hour"], as_index=False, sort=True)[VALUE].max()
    return busier


def forecast_target_load(
    network: pd.DataFrame, targets: Sequence[str], now: pd.Timestamp
) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """``{node: {target: bits/s}}`` for the hour after ``now``, and ``{node: why}`` for nodes left out."""
    from models.forecast import forecasters

    skipped: dict[str, str] = {}
    load = _hourly_link_load(network, targets, now) if not network.empty else pd.DataFrame()
    if load.empty:
        return {}, skipped
    hours = load.groupby(["node", "device"])[VALUE].transform("size")
    for node, n in load.loc[hours < MIN_HOURS].groupby("node")[VALUE].size().items():
        skipped[str(node)] = f"{n} h of network history, the forecast needs {MIN_HOURS}"
    load = load.loc[~load["node"].isin(set(skipped))]
    if load.empty:
        return {}, skipped
    sid = "s" + load.groupby(["node", "device"], sort=False).ngroup().astype(str)
    keys = pd.DataFrame({ID: sid, "node": load["node"], "device": load["device"]}).drop_duplicates(ID)
    history = pd.DataFrame({ID: sid, TIME: load["hour"], VALUE: load[VALUE].clip(lower=0)})
    horizon = max(1, math.ceil((now + pd.Timedelta(hours=1) - history[TIME].max()) / pd.Timedelta(hours=1)))
    predicted = forecasters.create(NETWORK_FORECASTER).fit(history).predict(horizon, level=(80,))
    peak = predicted[predicted[TIME] > now - pd.Timedelta(hours=1)].groupby(ID)[BAND].max()
    keys = keys.assign(bps=keys[ID].map(peak)).dropna(subset=["bps"])
    out: dict[str, dict[str, float]] = {}
    for node, rows in keys.groupby("node", sort=True):
        per_device = dict(zip(rows["device"], rows["bps"].astype(float), strict=True))
        if "*" in per_device:
            out[str(node)] = dict.fromkeys(targets, per_device["*"] / len(targets))
            continue
        missing = [t for t in targets if t not in per_device]
        if missing:
            skipped[str(node)] = f"no network history for target {missing[0]}"
            continue
        out[str(node)] = {t: per_device[t] for t in targets}
    return out, skipped


def job_mix(pods: pd.DataFrame, node_gpus: Mapping[str, float]) -> dict[str, tuple[float, dict[str, float]]]:
    """``{node: (distributed_share, {queue: GPUs})}`` from the running GPU pods."""
    if pods.empty:
        return {}
    job = pods["job"].astype(str)
    pods = pods.assign(node=pods["node"].astype(str), job=job.where(job != "", "pod/" + pods["pod"].astype(str)))
    spans = pods.groupby(["namespace", "job"])["node"].transform("nunique")
    distributed = pods.assign(distributed=pods["gpus"].where(spans > 1, 0.0))
    per_node = distributed.groupby("node")[["distributed", "gpus"]].sum()
    queues: dict[str, dict[str, float]] = {}
    named = pods.loc[pods["queue"].astype(str) != ""]
    sums = named.groupby(["node", "queue"])["gpus"].sum()
    for node, queue, gpus in zip(sums.index.get_level_values(0), sums.index.get_level_values(1), sums, strict=True):
        queues.setdefault(str(node), {})[str(queue)] = float(gpus)
    out: dict[str, tuple[float, dict[str, float]]] = {}
    for node, distributed, gpus in zip(per_node.index, per_node["distributed"], per_node["gpus"], strict=True):
        total = max(float(node_gpus.get(str(node), 0.0)), float(gpus))
        out[str(node)] = (min(float(distributed) / total, 1.0) if total > 0 else 0.0, queues.get(str(node), {}))
    return out


def _no_fsync(fd: int) -> None:
    return None


class XdpLoop:
    """The XDP part of a loop cycle: forecast, job mix, profile, publish (see the module docstring)."""

    def __init__(
        self,
        settings: XdpLoopSettings,
        source: XdpSource,
        *,
        publisher: XdpPublisher | None = None,
        registry: CollectorRegistry | None = None,
        policy: XdpPolicy | None = None,
    ) -> None:
        self.settings, self.source, self.publisher = settings, source, publisher
        self.policy = policy or XdpPolicy()
        self.chosen: dict[str, Profile] = {}  # last cycle's profile per node (the dead band's reference)
        self.last: XdpReport | None = None  # the last cycle's report (the demo sums it up)
        r = registry or CollectorRegistry()
        self.profile_gauge = Gauge(
            "predictor_xdp_profile", "XDP profile the loop chose per node (value 1).", ["node", "profile"], registry=r
        )
        self.load_gauge = Gauge(
            "predictor_xdp_forecast_bps",
            "Forecast load (upper 80 % band, next hour) per node and steering target, bits per second.",
            ["node", "target"],
            registry=r,
        )
        self.weight_gauge = Gauge(
            "predictor_xdp_weight",
            "Weight of each steering target in the profile the loop chose per node.",
            ["node", "target"],
            registry=r,
        )
        self.share_gauge = Gauge(
            "predictor_xdp_distributed_share", "Share of a node's GPUs held by multi-node jobs.", ["node"], registry=r
        )

    def plan(self, now: pd.Timestamp) -> XdpReport:
        """Inputs and a profile per node (reads only)."""
        s = self.settings
        loads, skipped = forecast_target_load(self.source.network(now), s.targets, now)
        mix = job_mix(self.source.pods(now), self.source.node_gpus(now))
        report = XdpReport(skipped=skipped)
        for node in sorted(loads):
            if not is_dns1123_subdomain(node):  # what Kubernetes allows for a node, and a safe key and file name
                report.skipped[node] = "not a valid node name"
                continue
            share, queues = mix.get(node, (0.0, {}))
            inputs = ForecastInputs(
                generated_at=now.to_pydatetime(),
                node=node,
                distributed_share=share,
                queues=queues,
                forecaster=report.forecaster,
                targets=[
                    TargetInput(iface=t, capacity_bps=s.capacity_bps, forecast_bps=loads[node][t]) for t in s.targets
                ],
            )
            profile = choose_profile(
                node,
                [TargetLoad(t, s.capacity_bps, loads[node][t]) for t in s.targets],
                JobMix(distributed_share=share),
                forecast_age_s=0.0,
                policy=self.policy,
                current=self.chosen.get(node),
            )
            report.nodes.append(NodeXdp(node, inputs, profile))
        return report

    def run(self, now: pd.Timestamp, *, mode: str, plan_dir: Path) -> XdpReport:
        """Plan, write ``<plan_dir>/xdp/``, publish to the ConfigMap outside plan mode, export the gauges.

        A failure here never fails the queue cycle: it is reported (and the agents hold their profiles).
        """
        try:
            report = self.plan(now)
        except (PredictorError, ValueError, ArithmeticError) as exc:  # the forecaster raises ValueErrors
            self.last = XdpReport(error=f"XDP inputs not planned: {exc}".splitlines()[0])
            return self.last
        if not report.nodes:  # e.g. the exporters went missing: keep what the agents have (they go stale)
            self.last = XdpReport(skipped=report.skipped, error="no node has network history: nothing published")
            return self.last
        documents = {f"{n.node}.json": n.inputs.model_dump_json() + "\n" for n in report.nodes}
        try:
            self._write(plan_dir / "xdp", documents if mode == "plan" else {}, report)
        except (OSError, PredictorError) as exc:
            report.error = f"XDP plan files not written: {exc}"
        if mode != "plan" and self.publisher is not None:
            try:
                report.published = self.publisher.publish(documents, dry_run=mode != "apply")
            except PredictorError as exc:
                report.error = f"XDP inputs not published: {exc}"
        self.chosen = {n.node: n.profile for n in report.nodes}
        self._export(report)
        self.last = report
        return report

    @staticmethod
    def _write(out: Path, files: Mapping[str, str], report: XdpReport) -> None:
        """Per-node inputs (plan mode only: outside it the ConfigMap is the agents' inputs, and a file per
        node per cycle would only cost time) and the chosen profiles, under ``<plan_dir>/xdp``."""
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("*.json"):
            if old.name not in files and old.name != PROFILES:
                old.unlink()
        for name, text in files.items():
            # Atomic (rename) but not fsynced one by one: the inputs are rewritten every cycle, and a file
            # a power cut left torn is unreadable, on which the agent holds. One directory sync for all.
            write_text(child_path(out, name), text, fsync=_no_fsync)
        if files:
            fsync_directory(out)
        profiles = {n.node: n.profile.model_dump() for n in report.nodes}
        write_text(out / PROFILES, json.dumps(profiles, indent=2, sort_keys=True) + "\n")

    def _export(self, report: XdpReport) -> None:
        for gauge in (self.profile_gauge, self.load_gauge, self.weight_gauge, self.share_gauge):
            gauge.clear()
        for n in report.nodes:
            self.profile_gauge.labels(node=n.node, profile=n.profile.name).set(1)
            self.share_gauge.labels(node=n.node).set(n.inputs.distributed_share)
            for t in n.inputs.targets:
                self.load_gauge.labels(node=n.node, target=t.iface).set(float(t.forecast_bps or 0.0))
            for target, weight in n.profile.weights.items():
                self.weight_gauge.labels(node=n.node, target=target).set(weight)
