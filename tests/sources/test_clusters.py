"""The fleet's sources: which Prometheus each cluster is read from, and the qualified series names."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from predictor.config import PrometheusSettings, Settings
from predictor.errors import ConfigError, QueryError, TemporaryDataSourceError
from predictor.sources.clusters import ClusterSource, NamedClusterSource, cluster_sources, qualify, split_qualified
from predictor.sources.scoped import ScopedSource

CENTRAL = "http://central:9090"


def _settings(**extra: object) -> Settings:
    return Settings.model_validate({"prometheus": {"url": CENTRAL, "headers": {"X-Scope-OrgID": "fleet"}}, **extra})


def _unnamed(cluster: ClusterSource) -> object:
    """The source under the error-naming wrapper every named cluster gets."""
    source = cluster.source
    return source.source if isinstance(source, NamedClusterSource) else source


def _urls(settings: Settings, only: list[str] | None = None) -> list[tuple[str | None, str, bool]]:
    made: list[PrometheusSettings] = []

    def make(prometheus: PrometheusSettings) -> object:
        made.append(prometheus)
        return prometheus

    out = []
    for cluster in cluster_sources(settings, make_source=make, only=only):  # type: ignore[arg-type]
        source = _unnamed(cluster)
        scoped = isinstance(source, ScopedSource)
        inner = source.source if isinstance(source, ScopedSource) else source
        assert isinstance(inner, PrometheusSettings)
        out.append((cluster.name, inner.url, scoped))
    assert len({id(p) for p in made}) == len(made)  # the central store's client is made once, shared
    return out


def test_no_clusters_is_todays_single_unnamed_cluster() -> None:
    assert _urls(_settings()) == [(None, CENTRAL, False)]


def test_clusters_read_their_own_prometheus_or_the_central_store_scoped() -> None:
    settings = _settings(
        clusters=[
            {"name": "a"},
            {"name": "b", "prometheus": {"url": "http://b:9090"}},
            {"name": "c", "label_value": "prod-c"},
        ]
    )
    assert _urls(settings) == [("a", CENTRAL, True), ("b", "http://b:9090", False), ("c", CENTRAL, True)]
    sources = cluster_sources(settings, make_source=lambda p: p)  # type: ignore[arg-type,return-value]
    scoped = {c.name: s.matchers for c in sources if isinstance(s := _unnamed(c), ScopedSource)}
    assert scoped == {"a": {"cluster": "a"}, "c": {"cluster": "prod-c"}}
    # The central store's tenant header and other settings travel with every scoped read.
    first = _unnamed(sources[0])
    assert isinstance(first, ScopedSource) and first.source.headers == {"X-Scope-OrgID": "fleet"}  # type: ignore[attr-defined]


def test_cluster_label_is_configurable() -> None:
    settings = _settings(clusters=[{"name": "a"}])
    settings.prometheus.cluster_label = "k8s_cluster"
    source = _unnamed(cluster_sources(settings, make_source=lambda p: p)[0])  # type: ignore[arg-type,return-value]
    assert isinstance(source, ScopedSource) and source.matchers == {"k8s_cluster": "a"}


class _Failing:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def query_range(self, *args: object) -> object:
        raise self.error


@pytest.mark.parametrize("error", [TemporaryDataSourceError("connection refused"), QueryError("HTTP 400: bad")])
def test_a_named_clusters_read_errors_name_the_cluster_and_keep_their_class(error: Exception) -> None:
    settings = _settings(clusters=[{"name": "a"}, {"name": "b", "prometheus": {"url": "http://b:9090"}}])
    sources = cluster_sources(settings, make_source=lambda p: _Failing(error))  # type: ignore[arg-type,return-value]
    for cluster in sources:
        with pytest.raises(type(error), match=f"^cluster {cluster.name}: {error}$"):
            cluster.source.query_range("up", *[None] * 3)  # type: ignore[arg-type]


def test_the_unnamed_clusters_errors_are_unchanged() -> None:
    error = TemporaryDataSourceError("connection refused")
    [cluster] = cluster_sources(_settings(), make_source=lambda p: _Failing(error))  # type: ignore[arg-type,return-value]
    with pytest.raises(TemporaryDataSourceError, match=r"^connection refused$"):
        cluster.source.query_range("up", *[None] * 3)  # type: ignore[arg-type]


def test_only_narrows_in_settings_order_and_unknown_names_are_one_line_errors() -> None:
    settings = _settings(clusters=[{"name": "a"}, {"name": "b"}, {"name": "c"}])
    assert [name for name, _, _ in _urls(settings, only=["c", "a"])] == ["a", "c"]
    with pytest.raises(ConfigError, match=r"^unknown cluster x: the settings list a, b, c$"):
        cluster_sources(settings, only=["x", "a"])
    with pytest.raises(ConfigError, match="settings list no clusters"):
        cluster_sources(_settings(), only=["a"])


@pytest.mark.parametrize(
    "clusters",
    [
        [{"name": "a"}, {"name": "a"}],
        [{"name": "A"}],
        [{"name": "a/b"}],
        [{"name": "a", "colour": "red"}],
    ],
)
def test_bad_cluster_lists_are_refused(clusters: list[dict[str, str]]) -> None:
    with pytest.raises(ValidationError):
        _settings(clusters=clusters)


def test_a_settings_file_listing_a_cluster_twice_is_one_line_naming_it(tmp_path: Path) -> None:
    from predictor.config import load_settings

    path = tmp_path / "fleet.yaml"
    path.write_text("clusters:\n  - name: a\n  - name: a\n")
    with pytest.raises(ConfigError, match=rf"^invalid settings in {path}: cluster name a listed more than once$"):
        load_settings(path)


def test_two_clusters_reading_one_label_value_of_the_central_store_are_refused() -> None:
    with pytest.raises(ValidationError, match=r'clusters a and b both read cluster="a" from the central store'):
        _settings(clusters=[{"name": "a"}, {"name": "b", "label_value": "a"}])
    # A cluster with its own Prometheus reads nothing from the central store: no clash.
    own = _settings(clusters=[{"name": "a"}, {"name": "b", "label_value": "a", "prometheus": {"url": "http://b:9090"}}])
    assert [name for name, _, _ in _urls(own)] == ["a", "b"]


@given(
    cluster=st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True),
    queue=st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,20}[a-z0-9])?", fullmatch=True),
)
def test_qualified_names_split_back(cluster: str, queue: str) -> None:
    assert split_qualified(qualify(cluster, queue)) == (cluster, queue)
    assert qualify(None, queue) == queue and split_qualified(queue) == (None, queue)


@pytest.mark.parametrize(
    ("command", "out_name"),
    [
        (["rightsize", "--start", "2026-11-01", "--end", "2026-11-02"], "out.csv"),
        (["diagnose", "--at", "2026-11-02"], "out.json"),
        (["report"], "out"),
        (["export", "--query", "up", "--start", "2026-11-01", "--end", "2026-11-02"], "out.csv"),
    ],
)
def test_cluster_option_without_clusters_listed_names_it_before_any_other_option(
    command: list[str], out_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from predictor.cli import main

    settings = tmp_path / "settings.yaml"
    settings.write_text(f"prometheus: {{url: {CENTRAL}}}\n")  # no --prometheus-url given: not the error
    out = tmp_path / out_name
    assert main(["--config", str(settings), *command, "--out", str(out), "--cluster", "prod-a"]) == 1
    assert capsys.readouterr().err.strip() == "error: unknown cluster prod-a: the settings list no clusters"
    assert not out.exists()


@pytest.mark.parametrize(
    ("command", "out_name"),
    [
        (["rightsize"], "out.csv"),
        (["diagnose", "--at", "2026-11-02"], "out.json"),
        (["report"], "out"),
    ],
)
def test_cluster_option_with_a_history_file_is_refused_not_ignored(
    command: list[str], out_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from predictor.cli import main

    settings = tmp_path / "settings.yaml"
    settings.write_text("clusters: [{name: a}, {name: b}]\n")
    history, out = tmp_path / "history.csv", tmp_path / out_name
    history.write_text("series_id,timestamp,value\na/team-a,2026-11-01T00:00:00Z,1\n")
    assert (
        main(["--config", str(settings), *command, "--history", str(history), "--out", str(out), "--cluster", "b"]) == 1
    )
    assert capsys.readouterr().err.strip() == (
        f"error: --cluster b with --history {history}: --cluster picks the clusters read from Prometheus; "
        "a --history file is read whole"
    )
    assert not out.exists()


def test_train_forecast_with_cluster_and_history_registers_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from predictor.cli import main

    settings = tmp_path / "settings.yaml"
    settings.write_text("clusters: [{name: a}, {name: b}]\n")
    history, registry = tmp_path / "history.csv", tmp_path / "mlflow.db"
    history.write_text("series_id,timestamp,value\na/team-a,2026-11-01T00:00:00Z,1\n")
    assert (
        main(
            [
                "--config",
                str(settings),
                "train",
                "forecast",
                "--history",
                str(history),
                "--cluster",
                "b",
                "--tracking-uri",
                f"sqlite:///{registry}",
            ]
        )
        == 1
    )
    assert "--cluster b with --history" in capsys.readouterr().err
    assert not registry.exists()
