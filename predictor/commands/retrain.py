"""``predictor retrain``: train every model family once, let each gate its own promotion, summarise.

What one CronJob may run instead of one CronJob per family (``k8s/base/cronjobs.yaml``). Each family
trains through the very command its own CronJob runs (``predictor train <family>``, invoked in this
process with the same global options), so both deployments share one code path and one set of flags.

Outcomes per family, read from the registry's aliases before and after the run:

- ``promoted``: the new version became ``champion``;
- ``rejected``: the new version stays ``challenger``: the promotion gate kept the champion (not an error).

Either way the detail is the gate's reason from the new version's run (its ``promotion`` tag): both
scores and the rule that decided (``predictor.registry.promotion``).
- ``not available in this build``: no ``train <family>`` command is registered (not an error);
- ``failed``: the command failed, registered no new version, or the registry could not be read.

The exit code is 1 only when some family ``failed``; one family failing never stops the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Protocol

import typer
from rich.table import Table
from typer.core import TyperGroup

from predictor.commands._common import CliState, console, err_console, settings_from
from predictor.commands._lazy import LazyGroup
from predictor.config import MlflowSettings
from predictor.errors import PredictorError
from predictor.registry import (
    CHALLENGER,
    CHAMPION,
    FAMILIES,
    ModelRegistry,
    ModelVersionInfo,
)

if TYPE_CHECKING:
    from typer import _click as click

__all__ = ["FAMILIES", "FamilyResult", "RegistryReader", "retrain", "retrain_cmd", "retrain_command"]

# `predictor train <command>` -> registered model name (one registered model per family).

PROMOTED = "promoted"
REJECTED = "rejected"
UNAVAILABLE = "not available in this build"
FAILED = "failed"


class RegistryReader(Protocol):
    """The part of ``ModelRegistry`` this command needs: who holds an alias."""

    def get(self, family: str, alias: str = CHAMPION) -> ModelVersionInfo | None: ...


@dataclass(frozen=True)
class FamilyResult:
    """One line of the summary."""

    command: str
    family: str
    status: str
    detail: str = ""
    version: str | None = None
    champion: str | None = None
    why: str = ""  # the promotion gate's reason (both scores, the rule), from the new version's run

    @property
    def broken(self) -> bool:
        return self.status == FAILED


Runner = Callable[[str], int]


def _aliases(registry: RegistryReader, family: str) -> tuple[ModelVersionInfo | None, ModelVersionInfo | None]:
    return registry.get(family, CHAMPION), registry.get(family, CHALLENGER)


def _version(info: ModelVersionInfo | None) -> str | None:
    return None if info is None else info.version


def _why(info: ModelVersionInfo) -> str:
    """The promotion gate's reason recorded on the version's run, if any."""
    return info.tags.get("promotion", "")


def _train_one(command: str, family: str, registry: RegistryReader, run: Runner) -> FamilyResult:
    try:
        champion_before, challenger_before = _aliases(registry, family)
    except PredictorError as exc:
        return FamilyResult(command, family, FAILED, f"registry unreadable before training: {exc}")
    code = run(command)
    if code != 0:
        return FamilyResult(
            command,
            family,
            FAILED,
            f"`predictor train {command}` exited with {code}",
            champion=_version(champion_before),
        )
    try:
        champion, challenger = _aliases(registry, family)
    except PredictorError as exc:
        return FamilyResult(command, family, FAILED, f"registry unreadable after training: {exc}")
    new = challenger if challenger is not None and _version(challenger) != _version(challenger_before) else None
    if (
        champion is not None
        and _version(champion) != _version(champion_before)
        and (new is None or _version(new) == _version(champion))
    ):
        before = f"v{champion_before.version}" if champion_before else "none"
        return FamilyResult(
            command,
            family,
            PROMOTED,
            f"champion v{champion.version} (was {before})",
            version=champion.version,
            champion=champion.version,
            why=_why(champion),
        )
    if new is None:
        return FamilyResult(
            command, family, FAILED, "training exited 0 but registered no new version", champion=_version(champion)
        )
    kept = f"champion v{champion.version} kept" if champion else "no champion"
    return FamilyResult(
        command,
        family,
        REJECTED,
        f"challenger v{new.version} not promoted; {kept}",
        version=new.version,
        champion=_version(champion),
        why=_why(new),
    )


def retrain(
    commands: Sequence[str], available: Iterable[str], registry: RegistryReader, run: Runner
) -> list[FamilyResult]:
    """Train each of ``commands`` (keys of ``FAMILIES``) that is ``available``, in order; never stops early."""
    present = set(available)
    results: list[FamilyResult] = []
    for command in commands:
        family = FAMILIES[command]
        if command not in present:
            results.append(FamilyResult(command, family, UNAVAILABLE, f"no `predictor train {command}` command"))
            continue
        results.append(_train_one(command, family, registry, run))
    return results


def _train_commands(ctx: typer.Context) -> set[str]:
    """Names under ``predictor train`` in the app running this command (listed, not imported)."""
    root = ctx.find_root()
    group = root.command
    if not isinstance(group, TyperGroup):
        return set()
    train = group.load_command(root, "train") if isinstance(group, LazyGroup) else group.get_command(root, "train")
    return set(train.list_commands(root)) if isinstance(train, TyperGroup) else set()


def _in_process_runner(app: click.Command, state: CliState) -> Runner:
    """Run ``predictor [global options] train <command>`` in this process; an error becomes an exit code."""
    global_args = [*(["--config", str(state.config)] if state.config else []), *(["--debug"] if state.debug else [])]

    def run(command: str) -> int:
        console.rule(f"predictor train {command}")
        try:
            result = app.main(args=[*global_args, "train", command], prog_name="predictor", standalone_mode=False)
        except PredictorError as exc:
            err_console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
            return 1
        except typer.Abort:
            raise
        except typer.TyperException as exc:  # a usage error of the training command
            show = getattr(exc, "show", None)
            if callable(show):
                show()
            else:
                err_console.print(f"error: {exc}", markup=False)
            return int(getattr(exc, "exit_code", 2)) or 1
        except Exception as exc:  # one family crashing must not stop the others; the summary reports it
            if state.debug:
                err_console.print_exception()
            else:
                err_console.print(f"error: train {command} crashed: {type(exc).__name__}: {exc}", markup=False)
            return 1
        return result if isinstance(result, int) else 0

    return run


def _print_summary(results: Sequence[FamilyResult]) -> None:
    table = Table(title="retrain summary")
    for column in ("family", "status", "detail"):
        table.add_column(column)
    colour = {PROMOTED: "green", REJECTED: "yellow", UNAVAILABLE: "dim", FAILED: "red"}
    for result in results:
        table.add_row(result.family, f"[{colour[result.status]}]{result.status}[/]", result.detail)
    console.print(table)
    for result in results:  # one unwrapped line each: the reasons hold both scores and do not fit a column
        if result.why:
            console.print(f"{result.family} v{result.version}: {result.why}", markup=False, soft_wrap=True)
    broken = [r.family for r in results if r.broken]
    console.print(f"failed: {', '.join(broken)}" if broken else "ok: nothing is broken", markup=False)


def retrain_command(
    registry_factory: Callable[[MlflowSettings], RegistryReader] = ModelRegistry,
) -> Callable[..., None]:
    """The ``predictor retrain`` command reading aliases through ``registry_factory`` (tests pass their own)."""

    def retrain_cmd(
        ctx: typer.Context,
        all_families: Annotated[bool, typer.Option("--all", help="Every family: forecast, demand, rca.")] = False,
        family: Annotated[
            list[str] | None, typer.Option("--family", help="A family to train (repeatable): forecast, demand, rca.")
        ] = None,
        ray: Annotated[
            str | None,
            typer.Option(
                "--ray",
                metavar="ADDRESS",
                help="Run fits and backtests as Ray tasks there (host:port, ray://..., auto, local).",
            ),
        ] = None,
        processes: Annotated[
            int | None, typer.Option("--processes", min=1, help="Run fits and backtests in N local processes.")
        ] = None,
    ) -> None:
        """Train model families, let each promote only a better challenger, print a summary.

        Exits 1 only when something is broken (a training failed or the registry is unreadable);
        a rejected challenger or a family missing from this build is not an error.
        """
        chosen = list(FAMILIES) if all_families else list(dict.fromkeys(family or []))
        if not chosen:
            raise typer.BadParameter("give --all or at least one --family", param_hint="--all/--family")
        unknown = [name for name in chosen if name not in FAMILIES]
        if unknown:
            raise typer.BadParameter(
                f"unknown family {', '.join(unknown)}; known: {', '.join(FAMILIES)}", param_hint="--family"
            )
        settings = settings_from(ctx)
        state: CliState = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
        from pipelines.fanout import make_executor, use_executor

        # fits and backtests run in chunks on this executor; the registering stays here, once per family
        with use_executor(make_executor(ray, processes)) as executor:
            console.print(f"training on: {executor.name}", markup=False, highlight=False)
            results = retrain(
                chosen,
                _train_commands(ctx),
                registry_factory(settings.mlflow),
                _in_process_runner(ctx.find_root().command, state),
            )
        _print_summary(results)
        if any(r.broken for r in results):
            raise typer.Exit(code=1)

    return retrain_cmd


retrain_cmd = retrain_command()
