"""``predictor xdp …``: load, switch, inspect and unload the XDP load balancer, and run the node agent.

Thin by design (no logic of its own): parse flags, call one function of ``predictor.actuators.xdp``, print.
Errors from there are the project's own and become one line with exit code 1 in ``predictor.cli``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer

from predictor.actuators import xdp as xdp_actuator
from predictor.actuators.xdp_agent import AgentState, load_agent_settings, log_lines, run_agent
from predictor.actuators.xdp_profiles import load_profile
from predictor.commands._common import console, err_console
from predictor.errors import InputError

__all__ = ["xdp_app"]

xdp_app = typer.Typer(
    help="XDP load-balancing profiles: load the program, switch profiles atomically, read stats.",
    no_args_is_help=True,
)

PinDir = Annotated[Path, typer.Option("--pin-dir", help="bpffs directory holding the program and maps.")]


def _print_json(data: object) -> None:
    # Plain echo, not rich: machine-readable output must not be wrapped or coloured.
    typer.echo(json.dumps(data, default=str))


@xdp_app.command("load")
def load_cmd(
    iface: Annotated[str, typer.Option("--iface", help="Interface whose ingress is steered.")],
    targets: Annotated[str, typer.Option("--targets", help="Comma-separated target interfaces.")],
    pin_dir: PinDir,
    mode: Annotated[str, typer.Option("--mode", help="skb (generic, any netdev) or native (driver).")] = "native",
    profile: Annotated[Path | None, typer.Option("--profile", help="Profile YAML to start with.")] = None,
    obj: Annotated[Path | None, typer.Option("--object", help="Built program (default bpf/build/xdp_lb.o).")] = None,
) -> None:
    """Load, pin and attach the load balancer (everything passes until a profile is set)."""
    if mode not in ("skb", "native"):
        raise InputError(f"--mode must be skb or native, not {mode!r}")
    names = [t.strip() for t in targets.split(",") if t.strip()]
    chosen: Literal["skb", "native"] = "skb" if mode == "skb" else "native"
    prof = load_profile(profile) if profile else None
    actuator = xdp_actuator.load(iface, names, pin_dir, mode=chosen, profile=prof, obj_path=obj)
    status = actuator.status()
    active = status.active_profile or "none (everything passes)"
    console.print(f"loaded on {iface} ({mode}), targets {', '.join(names)}, profile {active}")


@xdp_app.command("set-profile")
def set_profile_cmd(
    pin_dir: PinDir,
    profile: Annotated[Path, typer.Option("--profile", help="Profile YAML to switch to.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan, change nothing.")] = False,
) -> None:
    """Switch the active profile atomically (write the inactive table, flip one u32)."""
    actuator = xdp_actuator.XdpActuator(pin_dir)
    changes = actuator.plan(load_profile(profile))
    applied = actuator.apply(changes, dry_run=dry_run)
    if not changes:
        console.print("already converged: nothing to change")
    for change in changes:
        verb = "would switch" if dry_run else "switched"
        console.print(f"{verb} {change.before.get('profile')} → {change.after['profile']}: {change.reason}")
    if applied and actuator.last_switch_ns is not None:
        console.print(f"flip took {actuator.last_switch_ns / 1000:.1f} µs")


@xdp_app.command("status")
def status_cmd(
    pin_dir: PinDir,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Active profile, weights and per-target packet counters."""
    status = xdp_actuator.XdpActuator(pin_dir).status()
    if as_json:
        _print_json(status.to_json())
        return
    mode = " (observe only)" if status.observe else ""
    console.print(f"{status.iface}: profile {status.active_profile or 'none (everything passes)'}{mode}")
    for target in status.targets:
        console.print(f"  {target}: weight {status.weights.get(target, 0)}, {status.stats[target]} packets")
    console.print(f"  passed {status.passed}, unparsed {status.unparsed}, observed {status.observed}")


@xdp_app.command("upgrade")
def upgrade_cmd(
    pin_dir: PinDir,
    obj: Annotated[Path | None, typer.Option("--object", help="New build (default bpf/build/xdp_lb.o).")] = None,
) -> None:
    """Replace the running program through its bpf_link (compare-and-swap), keeping maps and profile."""
    prog_id = xdp_actuator.XdpActuator(pin_dir).upgrade(obj or xdp_actuator.default_object())
    console.print(f"upgraded {pin_dir}: now program id {prog_id}")


@xdp_app.command("unload")
def unload_cmd(pin_dir: PinDir) -> None:
    """Detach the program and remove every pin."""
    xdp_actuator.XdpActuator(pin_dir).unload()
    console.print(f"unloaded {pin_dir}")


def _agent_config_path(agent_config: Path | None, config: Path | None) -> Path:
    # ``--config`` names the global settings file everywhere else, so the agent's own file got its own flag;
    # the old spelling keeps working (DaemonSets in the field pass it) with a one-line note.
    if config is not None:
        err_console.print(
            "note: `xdp agent --config` is deprecated, use --agent-config (--config names the "
            "global settings file elsewhere)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        if agent_config is not None and agent_config != config:
            raise typer.BadParameter(
                "give --agent-config only (--config is its deprecated alias)", param_hint="--agent-config"
            )
    path = agent_config or config
    if path is None:
        raise typer.BadParameter("the agent settings file is required", param_hint="--agent-config")
    return path


@xdp_app.command("agent")
def agent_cmd(
    agent_config: Annotated[
        Path | None, typer.Option("--agent-config", help="Agent settings YAML (node, pin_dir, inputs, ...).")
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="Deprecated alias of --agent-config.")] = None,
) -> None:
    """Every interval: read the inputs `predictor loop` published for this node (loop.xdp), choose a profile
    and switch to it atomically; missing, invalid or stale inputs hold the profile in force."""
    settings = load_agent_settings(_agent_config_path(agent_config, config))
    actuator = xdp_actuator.XdpActuator(settings.pin_dir)
    state = AgentState()
    if settings.metrics_port:
        from prometheus_client import CollectorRegistry, start_http_server

        from predictor.actuators.xdp_metrics import XdpStatsCollector

        registry = CollectorRegistry()
        registry.register(XdpStatsCollector(actuator, settings.node, state))
        where = f"{settings.metrics_address}:{settings.metrics_port}"
        try:
            start_http_server(settings.metrics_port, addr=settings.metrics_address, registry=registry)
        except OSError as exc:
            raise InputError(f"cannot serve /metrics on {where}: {exc.strerror or exc}") from exc
    # Held cycles (nothing loaded yet, ...) are retried every interval but logged once per change.
    for result in log_lines(run_agent(settings, actuator, state=state)):
        typer.echo(result.model_dump_json())
