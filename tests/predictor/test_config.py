"""Settings: YAML file, PREDICTOR_ variables, explicit flags, secrets kept out of reprs."""

from __future__ import annotations

from pathlib import Path

import pytest

from predictor.config import load_settings
from predictor.errors import ConfigError


def test_defaults_are_safe(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    assert settings.prometheus.verify_tls is True
    assert settings.actuators.mode == "plan" and settings.actuators.dry_run
    # Opt-in and recommend-only: a fresh install resizes nothing and manages no queue until one opts in.
    assert settings.actuators.queues.mode == "recommend" and not settings.actuators.queues.manage.all
    assert settings.actuators.xdp.mode == "plan" and not settings.actuators.writes_cluster
    assert settings.mlflow.tracking_uri == f"sqlite:///{tmp_path / 'mlflow.db'}"


def test_yaml_then_environment_then_flags(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "prometheus:\n  url: http://yaml:9090\n  headers: {X-Scope-OrgID: team-a}\n  retries: 5\n"
        "actuators:\n  queues: {writes: server-dry-run}\n"
    )
    assert load_settings(config).prometheus.url == "http://yaml:9090"
    monkeypatch.setenv("PREDICTOR_PROMETHEUS__URL", "http://env:9090")
    settings = load_settings(config)
    assert settings.prometheus.url == "http://env:9090"
    assert settings.prometheus.headers == {"X-Scope-OrgID": "team-a"}
    assert settings.prometheus.retries == 5
    assert settings.actuators.mode == "server-dry-run"
    flagged = load_settings(config, prometheus={"url": "http://flag:9090"})
    assert flagged.prometheus.url == "http://flag:9090"
    assert flagged.prometheus.retries == 5


def test_secret_comes_from_env_and_stays_out_of_reprs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREDICTOR_PROMETHEUS__BEARER_TOKEN", "t0ps3cret")
    settings = load_settings()
    assert settings.prometheus.resolved_bearer_token() == "t0ps3cret"
    assert "t0ps3cret" not in repr(settings) and "t0ps3cret" not in str(settings.model_dump())


def test_token_file_is_read_and_a_missing_one_is_a_config_error(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("abc\n")
    assert load_settings(prometheus={"bearer_token_file": token}).prometheus.resolved_bearer_token() == "abc"
    missing = load_settings(prometheus={"bearer_token_file": tmp_path / "nope"})
    with pytest.raises(ConfigError, match="cannot read bearer_token_file"):
        missing.prometheus.resolved_bearer_token()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("prometheus: [1, 2", "not valid YAML"),
        ("- a\n- b\n", "mapping at the top level"),
        ("prometheus:\n  retries: -1\n", "invalid setting prometheus.retries"),
        ("prometheus:\n  urll: x\n", "invalid setting prometheus.urll"),
        ("actuators:\n  queues: {mode: yolo}\n", "invalid setting actuators.queues.mode"),
        ("actuators:\n  queues: {writes: yolo}\n", "invalid setting actuators.queues.writes"),
        ("actuators:\n  queues: {manage: {selector: 'team in (a'}}\n", "invalid setting actuators.queues.manage"),
        ("prometheus:\n  bearer_token: a\n  basic_auth_user: u\n  basic_auth_password: p\n", "not both"),
    ],
)
def test_bad_config_is_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        load_settings(config)
    assert "\n" not in str(info.value)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(tmp_path / "absent.yaml")


def test_loop_stale_after_s_still_loads_into_the_planner_setting(tmp_path: Path) -> None:
    from predictor.config import DeprecatedSettingWarning

    config = tmp_path / "c.yaml"
    config.write_text("loop:\n  interval_s: 600\n  stale_after_s: 1800\n")
    with pytest.warns(DeprecatedSettingWarning, match=r"loop\.stale_after_s .* planner\.stale_after_s"):
        settings = load_settings(config)
    assert settings.planner.stale_after_s == 1800 and settings.loop.interval_s == 600
    assert not hasattr(settings.loop, "stale_after_s")  # one setting for the concept
    config.write_text("loop:\n  stale_after_s: 1800\nplanner:\n  stale_after_s: 900\n")
    with pytest.warns(DeprecatedSettingWarning):
        assert load_settings(config).planner.stale_after_s == 900  # the new key wins


def test_loop_stale_after_s_from_the_environment_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from predictor.config import DeprecatedSettingWarning

    monkeypatch.setenv("PREDICTOR_LOOP__STALE_AFTER_S", "600")
    with pytest.warns(DeprecatedSettingWarning):
        assert load_settings().planner.stale_after_s == 600


def test_the_cli_reports_a_deprecated_key_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from predictor.cli import main

    config = tmp_path / "c.yaml"
    config.write_text("loop:\n  stale_after_s: 1800\n")
    queues = tmp_path / "queues.json"
    queues.write_text('{"items": []}')
    forecast = tmp_path / "f.csv"
    forecast.write_text("series_id,timestamp,mean,lo-80,hi-80,lo-95,hi-95\nq,2026-11-02T00:00:00Z,1,1,1,1,1\n")
    assert (
        main(
            [
                "--config",
                str(config),
                "plan",
                "--queues",
                str(queues),
                "--forecast",
                str(forecast),
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["warning: settings key loop.stale_after_s is deprecated: use planner.stale_after_s"]


def test_readiness_window_is_three_loop_intervals() -> None:
    assert load_settings(None, loop={"interval_s": 300}).loop.ready_within_s == 900


def test_the_old_single_actuator_mode_still_loads_as_queue_writes_and_xdp_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from predictor.config import DeprecatedSettingWarning

    config = tmp_path / "c.yaml"
    config.write_text("actuators:\n  mode: server-dry-run\n")
    with pytest.warns(DeprecatedSettingWarning, match=r"actuators\.mode .* actuators\.queues\.writes"):
        old = load_settings(config).actuators
    # What the one switch meant: every queue write and the XDP inputs in that mode, queues resized.
    assert (old.queues.writes, old.queues.mode, old.xdp.mode) == ("server-dry-run", "apply", "server-dry-run")
    config.write_text("actuators:\n  mode: server-dry-run\n  xdp: {mode: apply}\n")
    with pytest.warns(DeprecatedSettingWarning):
        both = load_settings(config).actuators
    assert (both.queues.writes, both.xdp.mode) == ("server-dry-run", "apply")  # the new key wins
    monkeypatch.setenv("PREDICTOR_ACTUATORS__MODE", "apply")
    with pytest.warns(DeprecatedSettingWarning):
        assert load_settings().actuators.queues.writes == "apply"


def test_queue_and_xdp_modes_are_separate(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("actuators:\n  queues: {writes: server-dry-run}\n  xdp: {mode: apply}\n")
    actuators = load_settings(config).actuators
    assert actuators.mode == "server-dry-run" and actuators.dry_run  # queue patches only validated
    assert actuators.xdp.mode == "apply" and actuators.writes_cluster  # the agents still get their inputs
