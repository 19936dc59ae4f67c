"""The Kubernetes and Prometheus name grammars, as the API server and Prometheus apply them."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from predictor.config import ClusterSettings, PrometheusSettings
from predictor.errors import InputError
from predictor.names import (
    DNS1123_LABEL,
    LABEL_NAME,
    anchored,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_name,
    is_metric_name,
)
from predictor.planner.state import check_queue_name
from predictor.sources.promql import Matcher, Selector

NOT_STRINGS = [None, 7, b"abc", ["abc"]]


@pytest.mark.parametrize("name", ["a", "0", "prod-eu", "a1-b2", "x" * 63])
def test_dns1123_labels(name: str) -> None:
    assert is_dns1123_label(name) and is_dns1123_subdomain(name)


@pytest.mark.parametrize("name", ["", "-a", "a-", "A", "a_b", "a.b", "x" * 64, "a b", "ä", "a\n", "../a", *NOT_STRINGS])
def test_not_dns1123_labels(name: object) -> None:
    assert not is_dns1123_label(name)


@pytest.mark.parametrize("name", ["a", "team-a", "gpu.node-3.example", "a.b.c", "0.0", ("x" * 63 + ".") * 3 + "x" * 61])
def test_dns1123_subdomains(name: str) -> None:
    assert is_dns1123_subdomain(name)


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "../x", "/tmp/x", "a..b", ".a", "a.", "a.-b", "A.b", "a_b", "a\n", "x" * 254, *NOT_STRINGS],
)
def test_not_dns1123_subdomains(name: object) -> None:
    assert not is_dns1123_subdomain(name)


@pytest.mark.parametrize("name", ["a", "_", "__name__", "queue_name", "Hostname", "a1"])
def test_label_names(name: str) -> None:
    assert is_label_name(name) and is_metric_name(name)


@pytest.mark.parametrize("name", ["", "1a", "a-b", "a.b", "a:b", "volcano.sh/queue", "a b", "é", "a\n", *NOT_STRINGS])
def test_not_label_names(name: object) -> None:
    assert not is_label_name(name)


@pytest.mark.parametrize("name", ["up", "DCGM_FI_DEV_GPU_UTIL", "job:gpu_demand:sum", ":x", "_x"])
def test_metric_names(name: str) -> None:
    assert is_metric_name(name)


@pytest.mark.parametrize("name", ["", "1up", "gpu-util", "a.b", "a{b}", "a b", "a\n", *NOT_STRINGS])
def test_not_metric_names(name: object) -> None:
    assert not is_metric_name(name)


def test_anchored_grammars_match_the_predicates() -> None:
    for name in ["ok", "x" * 63, "a_b", "-a", "a"]:
        assert (re.fullmatch(anchored(DNS1123_LABEL), name) is not None) == is_dns1123_label(name)
        assert (re.fullmatch(anchored(LABEL_NAME), name) is not None) == is_label_name(name)


def test_every_user_of_a_name_applies_the_same_grammar() -> None:
    """Settings, selectors and queue checks accept and refuse exactly what the predicates do."""
    ClusterSettings(name="prod-eu")
    for bad in ("Prod", "a_b", "x" * 64):
        with pytest.raises(ValidationError):
            ClusterSettings(name=bad)
    PrometheusSettings(cluster_label="k8s_cluster")
    with pytest.raises(ValidationError):
        PrometheusSettings(cluster_label="k8s-cluster")
    with pytest.raises(InputError, match="invalid label name 'a-b'"):
        Matcher("a-b", "v")
    with pytest.raises(InputError, match="invalid metric name 'gpu-util'"):
        Selector("gpu-util")
    assert check_queue_name("team.a", source="test") == "team.a"
    with pytest.raises(InputError, match=r"'\.\./x' is not a valid queue name"):
        check_queue_name("../x", source="test")
