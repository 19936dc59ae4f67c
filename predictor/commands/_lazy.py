"""A command group that imports a command's module only when that command runs or shows its help.

Importing every command module at start cost every invocation the whole ML stack (torch, pandas,
scikit-learn, mlflow): ~390 MB resident for ``predictor collect --help`` on a GPU node whose agent
container is limited to a fraction of that. Here a group lists its lazy commands from a table
(name, ``module:attribute``, one-line help), so ``predictor --help`` reads no command module at all,
and resolving a command for a run imports exactly the module that defines it.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import typer
from typer.core import TyperCommand, TyperGroup

from predictor.errors import EnvironmentUnsupportedError

if TYPE_CHECKING:
    # Typer ships its own copy of click; the click package itself is not needed (nor in the agent image).
    from typer import _click as click

__all__ = ["LazyCommand", "LazyGroup", "lazy_group"]


@dataclass(frozen=True)
class LazyCommand:
    """One command: its name, where it is defined, and the line ``--help`` of its group shows for it.

    ``target`` is ``"package.module:attribute"``; the attribute is a command function (any function
    Typer accepts) or a ``typer.Typer`` (a group such as ``xdp``). ``help`` must be the first paragraph
    of the command's own help (a test compares them), because the group shows it without importing. A
    function ``<attribute>_epilog()`` beside a command function gives the text shown after its options.
    """

    name: str
    target: str
    help: str

    def load(self) -> click.Command:
        """Import the module and build the click command Typer would have built."""
        module_name, _, attribute = self.target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] in ("predictor", "pipelines", "models"):
                raise  # our own module missing is a bug, not an installation without extras
            # e.g. the node agent image, which installs only what `collect` and `xdp` import
            raise EnvironmentUnsupportedError(
                f"`predictor {self.name}` needs the Python package {exc.name!r}, which this installation lacks "
                "(the agent image runs only collect, xdp and version)"
            ) from exc
        obj: Any = getattr(module, attribute)
        if isinstance(obj, typer.Typer):
            group = typer.main.get_group(obj)
            group.name = self.name
            return group
        single = typer.Typer(add_completion=False)
        epilog = getattr(module, f"{attribute}_epilog", None)
        single.command(self.name, epilog=epilog() if callable(epilog) else None)(obj)
        return typer.main.get_command(single)


class _Placeholder(TyperCommand):
    """What a group's help listing sees: the name and help line, nothing imported."""

    def __init__(self, entry: LazyCommand) -> None:
        super().__init__(entry.name, help=entry.help)
        self.entry = entry


class LazyGroup(TyperGroup):
    """A Typer group whose ``lazy`` commands are imported when resolved, not when listed."""

    lazy: ClassVar[Sequence[LazyCommand]] = ()

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        # Placeholders in the command table: listed, shown in help and offered for typos like any command.
        for entry in self.lazy:
            self.commands.setdefault(entry.name, _Placeholder(entry))

    def load_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The real command ``cmd_name`` (importing its module), or ``None`` if there is none."""
        command = self.commands.get(cmd_name)
        if isinstance(command, _Placeholder):
            command = command.entry.load()
            self.commands[cmd_name] = command  # resolved once per process
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name is not None and isinstance(command, _Placeholder):
            command = self.load_command(ctx, name)
        return name, command, rest


def lazy_group(name: str, commands: Sequence[LazyCommand]) -> type[LazyGroup]:
    """A ``LazyGroup`` class listing ``commands``, for ``typer.Typer(cls=...)``."""
    return type(name, (LazyGroup,), {"lazy": tuple(commands), "__module__": __name__})
