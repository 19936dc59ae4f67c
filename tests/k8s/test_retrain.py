"""``predictor retrain``: what one CronJob may run instead of one per family.

A user relies on: every registered family is trained even when another fails; a rejected challenger
and a family missing from this build are reported but are not errors; the exit code is 1 only when
something is broken. The training commands here are small stand-ins registered on a fresh app, and the
registry is an in-memory one with the same ``get(family, alias)`` the real ``ModelRegistry`` has.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pytest
import typer

from predictor import cli
from predictor.commands import COMMANDS, TRAIN_COMMANDS, retrain
from predictor.commands._common import CliState
from predictor.errors import InputError, RegistryError
from predictor.registry import CHALLENGER, CHAMPION, ModelVersionInfo


class MemoryRegistry:
    def __init__(self) -> None:
        self.aliases: dict[tuple[str, str], str] = {}
        self.versions: dict[str, int] = {}
        self.broken = False

    def get(self, family: str, alias: str = CHAMPION) -> ModelVersionInfo | None:
        if self.broken:
            raise RegistryError("cannot read the registry: connection refused")
        version = self.aliases.get((family, alias))
        if version is None:
            return None
        why = "holdout MASE 0.9 vs champion v1 1.0 on the last 168 steps: better; promoted"
        if alias == CHALLENGER and self.aliases.get((family, CHAMPION)) != version:
            why = "holdout MASE 1.2 vs champion v1 1.0 on the last 168 steps: worse; champion kept"
        return ModelVersionInfo(family=family, version=version, run_id="r", tags={"promotion": why})

    def log(self, family: str, *, promote: bool) -> None:
        self.versions[family] = self.versions.get(family, 0) + 1
        version = str(self.versions[family])
        self.aliases[(family, CHALLENGER)] = version
        if promote:
            self.aliases[(family, CHAMPION)] = version


def make_app(registry: MemoryRegistry, behaviour: dict[str, str]) -> tuple[typer.Typer, list[tuple[str, CliState]]]:
    """A fresh CLI with the real global options and one stand-in ``train`` command per ``behaviour`` key."""
    app = typer.Typer()
    train = typer.Typer()
    app.add_typer(train, name="train")
    calls: list[tuple[str, CliState]] = []

    @app.callback()
    def _global(
        ctx: typer.Context,
        config: Annotated[Path | None, typer.Option("--config")] = None,
        debug: Annotated[bool, typer.Option("--debug")] = False,
    ) -> None:
        ctx.obj = CliState(config=config, debug=debug)

    def add(command: str, how: str) -> None:
        family = retrain.FAMILIES[command]

        @train.command(command)
        def _train(ctx: typer.Context) -> None:
            calls.append((command, ctx.obj))
            if how == "promote":
                registry.log(family, promote=True)
            elif how == "reject":
                registry.log(family, promote=False)
            elif how == "error":
                raise InputError("no history in the window")
            elif how == "crash":
                raise RuntimeError("boom")
            elif how == "exit3":
                raise typer.Exit(code=3)
            elif how == "usage":
                raise typer.BadParameter("--history does not exist")
            # "silent": exits 0 and registers nothing

    for command, how in behaviour.items():
        add(command, how)
    app.command("retrain")(retrain.retrain_command(registry_factory=lambda _settings: registry))
    return app, calls


def run(app: typer.Typer, *args: str) -> int:
    result = typer.main.get_command(app).main(args=list(args), prog_name="predictor", standalone_mode=False)
    return result if isinstance(result, int) else 0


def test_promoted_and_missing_families_are_not_errors(capsys: pytest.CaptureFixture[str]) -> None:
    registry = MemoryRegistry()
    app, calls = make_app(registry, {"forecast": "promote"})
    assert run(app, "retrain", "--all") == 0
    out = capsys.readouterr().out
    assert "promoted" in out and out.count("not available in this build") == 2
    assert "holdout MASE 0.9 vs champion v1 1.0" in out
    assert "ok: nothing is broken" in out
    assert [c for c, _ in calls] == ["forecast"]
    assert registry.aliases[("gpu-forecast", CHAMPION)] == "1"


def test_a_rejected_challenger_is_not_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    registry = MemoryRegistry()
    registry.log("gpu-forecast", promote=True)
    app, _ = make_app(registry, {"forecast": "reject"})
    assert run(app, "retrain", "--family", "forecast") == 0
    out = capsys.readouterr().out
    assert "rejected" in out and "challenger v2" in out and "champion v1 kept" in out
    assert "holdout MASE 1.2 vs champion v1 1.0" in out  # why, with both scores


@pytest.mark.parametrize("how", ["error", "crash", "exit3", "silent", "usage"])
def test_one_broken_family_fails_the_run_but_the_others_still_train(
    how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = MemoryRegistry()
    app, calls = make_app(registry, {"forecast": how, "demand": "promote", "rca": "reject"})
    assert run(app, "retrain", "--all") == 1
    out = capsys.readouterr().out
    assert [c for c, _ in calls] == ["forecast", "demand", "rca"]
    assert "failed: gpu-forecast" in out
    assert registry.aliases[("gpu-demand", CHAMPION)] == "1"


def test_an_unreadable_registry_is_broken(capsys: pytest.CaptureFixture[str]) -> None:
    registry = MemoryRegistry()
    registry.broken = True
    app, calls = make_app(registry, {"forecast": "promote"})
    assert run(app, "retrain", "--all") == 1
    assert "registry unreadable" in capsys.readouterr().out
    assert calls == []


def test_global_options_reach_each_training(tmp_path: Path) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text("loop: {interval_s: 60}\n", encoding="utf-8")
    registry = MemoryRegistry()
    app, calls = make_app(registry, {"forecast": "promote"})
    assert run(app, "--config", str(config), "retrain", "--family", "forecast") == 0
    assert calls[0][1].config == config


def test_family_choice_is_checked() -> None:
    app, _ = make_app(MemoryRegistry(), {})
    with pytest.raises(typer.BadParameter, match="--all or at least one --family"):
        run(app, "retrain")
    with pytest.raises(typer.BadParameter, match="unknown family gpu; known: forecast, demand, rca"):
        run(app, "retrain", "--family", "gpu")


def test_the_real_cli_has_retrain(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["retrain"]) == 2  # neither --all nor --family: a usage error, nothing trained
    assert "--all or at least one --family" in capsys.readouterr().err
    names = {c.name for c in COMMANDS}
    assert "retrain" in names
    available = {c.name for c in TRAIN_COMMANDS}
    assert available <= set(retrain.FAMILIES), "a new train command needs an entry in retrain.FAMILIES"
