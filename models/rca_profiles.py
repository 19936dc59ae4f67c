"""Which metric families a site exports: the availability profiles root-cause models are fitted and scored for.

Most clusters run the exporters as shipped, and as shipped they leave out families the symptom table can use:
dcgm-exporter's default counters comment out the clock-throttle reasons, ECC and NVLink error counters;
node_exporter's ``ethtool`` collector (PFC pause frames, ECN marks, CNPs) is off by default; ``ALERTS`` exists
only where alert rules are loaded. A model that needs a family the site lacks answers "unmeasured" for every
cause whose path reads it, so a model is fitted per profile with exactly the families the profile has, and a
window is diagnosed by the profile its queries actually returned (``profile_for``).

``absent`` lists the families a profile lacks, relative to ``METRIC_FAMILIES`` (everything the table reads).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from models.rca_specs import METRIC_FAMILIES, features_of_family

__all__ = ["DEFAULT_PROFILE", "PROFILES", "Profile", "profile_for"]

# dcgm-exporter's default-counters.csv ships these commented out.
DCGM_NOT_DEFAULT = (
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)
# node_exporter's ethtool collector is disabled unless ``--collector.ethtool`` is passed.
ETHTOOL = (
    "node_ethtool_rx_prio3_pause",
    "node_ethtool_tx_prio3_pause",
    "node_ethtool_np_ecn_marked_roce_packets",
    "node_ethtool_np_cnp_sent",
    "node_ethtool_rp_cnp_handled",
)
NIC = (
    "node_netstat_Tcp_RetransSegs",
    "node_network_receive_bytes_total",
    "node_network_receive_drop_total",
    "node_network_carrier_changes_total",
    *ETHTOOL,
)
VOLCANO = tuple(f for f in METRIC_FAMILIES if f.startswith("volcano_"))
# Present only where alert rules are loaded: never part of what a default install is assumed to have.
RULES_ONLY = ("ALERTS",)


@dataclass(frozen=True)
class Profile:
    """A named set of families a site exports, given as the families it lacks."""

    name: str
    absent: frozenset[str]
    description: str

    @property
    def present(self) -> frozenset[str]:
        return frozenset(METRIC_FAMILIES) - self.absent

    @property
    def absent_features(self) -> frozenset[str]:
        """The symptom features this profile cannot measure (any of their families absent)."""
        return frozenset(f for fam in self.absent for f in features_of_family(fam))


def _profile(name: str, absent: Iterable[str], description: str) -> Profile:
    return Profile(name, frozenset(absent), description)


_DEFAULT_ABSENT = (*DCGM_NOT_DEFAULT, *ETHTOOL, *RULES_ONLY)
PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        _profile(
            "dcgm-default",
            _DEFAULT_ABSENT,
            "dcgm-exporter's default counters, node_exporter, kube-state-metrics and Volcano as shipped",
        ),
        _profile(
            "dcgm-default+throttle",
            (f for f in _DEFAULT_ABSENT if f != "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"),
            "the defaults plus DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        ),
        _profile("everything", (), "every family the symptom table reads, ethtool RoCE counters and ALERTS included"),
        _profile("no-nic", (*_DEFAULT_ABSENT, *NIC), "the defaults without node_exporter's network counters"),
        _profile("no-volcano", (*_DEFAULT_ABSENT, *VOLCANO), "the defaults without Volcano's scheduler metrics"),
    )
}
DEFAULT_PROFILE = "dcgm-default"


def profile_for(present: Iterable[str], profiles: Iterable[Profile] | None = None) -> Profile:
    """The profile to diagnose a window with, from the families its queries returned.

    The richest profile (of ``profiles``, default ``PROFILES``) whose every family is present; when none fits
    (a family even the smallest profile reads is missing), the one missing the fewest of its families, and
    the missing ones stay unknown (NaN).
    """
    have = frozenset(present)
    among = list(PROFILES.values() if profiles is None else profiles)
    if not among:
        raise ValueError("no profiles to choose from")
    fitting = [p for p in among if p.present <= have]
    if fitting:
        return max(fitting, key=lambda p: len(p.present))
    return min(among, key=lambda p: (len(p.present - have), -len(p.present)))
