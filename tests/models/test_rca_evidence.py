"""The symptom table behind "the families a cause needs" (docs, remediation, the rules baseline)."""

from __future__ import annotations

from models.rca import CAUSES
from models.rca_evidence import EVIDENCE, evidence_families, signal_families
from models.rca_features import FEATURE_NAMES


def test_every_cause_has_measurable_evidence() -> None:
    assert set(EVIDENCE) == set(CAUSES)
    assert all(feature in FEATURE_NAMES for causes in EVIDENCE.values() for feature, _ in causes)
    assert all(evidence_families(c) for c in CAUSES)


def test_first_choice_first_and_no_tree_artefacts() -> None:
    # A GPU's heat is read from throttle reasons first, its temperature standing in on a default install.
    assert signal_families("gpu_thermal") == ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",)
    assert evidence_families("gpu_thermal") == ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_GPU_TEMP")
    # A node that is not Ready is read from kube-state-metrics, whatever a fitted tree splits on.
    assert evidence_families("node_not_ready") == ("kube_node_status_condition",)
    assert evidence_families("no_such_cause") == () and signal_families("no_such_cause") == ()
