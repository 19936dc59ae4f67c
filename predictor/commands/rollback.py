"""``predictor rollback --cycle ID [--queue Q] [--apply]``: restore the quota values a loop cycle replaced.

Thin: read the cycle's applied changes from the audit log, hold the loop's locks (the local lock on the
audit log and the leader Lease, as a loop in a writing mode holds them), plan the restore against the live
queues (``predictor.loop.rollback``), send it through the Volcano actuator — a server-side dry run unless
``--apply`` — audit it as a rollback of that cycle, and print what was (or would be) done.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from predictor.commands._common import console, settings_from
from predictor.commands._options import SettingsFileOption
from predictor.errors import ActuatorError, ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from predictor.actuators.audit import AuditLog, AuditRecord
    from predictor.actuators.volcano import Outcome, VolcanoActuator
    from predictor.config import Settings
    from predictor.loop.leader import Leader
    from predictor.loop.rollback import Restore

__all__ = ["rollback_command"]


def rollback_command(
    ctx: typer.Context,
    cycle: Annotated[str, typer.Option("--cycle", help="Cycle id to revert, as the audit log names it.")],
    queue: Annotated[str | None, typer.Option("--queue", help="Revert this queue only.")] = None,
    apply: Annotated[bool, typer.Option("--apply", help="Write (default: a server-side dry run).")] = False,
    kubeconfig: Annotated[
        Path | None, typer.Option("--kubeconfig", help="Kubeconfig (default: in-cluster, then ~/.kube/config).")
    ] = None,
    config: SettingsFileOption = None,
) -> None:
    """Restore the quota values a cycle replaced, from the audit log (dry run unless --apply).

    A queue whose quota moved again since the cycle is left as it is.

    To keep a rollback, annotate the queue gpu-capacity-predictor/mode=recommend first.
    """
    import pandas as pd

    from predictor.actuators.audit import AuditLog
    from predictor.actuators.volcano import VolcanoActuator, connect
    from predictor.loop.rollback import cycle_changes, plan_rollback

    settings = settings_from(ctx, config=config)
    if settings.clusters:
        raise ConfigError("rollback works on a single cluster: run it with that cluster's settings (no clusters list)")
    audit = AuditLog(settings.actuators.audit_log)
    records = cycle_changes(audit, cycle, queue)
    actuator = VolcanoActuator(connect(kubeconfig))
    now = pd.Timestamp.now(tz="UTC")
    leaders = _leaders(settings, actuator, audit)
    try:
        for leader in leaders:
            why = leader.acquire(now)
            if why:
                raise ActuatorError(f"{why}; nothing rolled back (a running loop holds it: stop the loop first)")
        live = {}
        for name in sorted({str(r["queue"]) for r in records}):
            try:
                live[name] = actuator.get_queue(name)
            except ActuatorError as exc:
                if "HTTP 404" not in str(exc):
                    raise
        restores = plan_rollback(records, live, cycle)
        outcomes = _send(actuator, audit, restores, cycle, now, apply=apply)
    finally:
        for leader in reversed(leaders):
            leader.release()
    console.print(_table(restores, outcomes, cycle, apply))
    if apply:
        _notify(settings, cycle, restores, outcomes)
    else:
        console.print("dry run (dryRun=All): nothing changed; run again with --apply to write", markup=False)
    refused = [r.queue for r in restores if not _restored(r, outcomes.get(r.queue))]
    if refused:
        console.print(f"not rolled back: {', '.join(refused)}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1)


def _restored(restore: Restore, outcome: Outcome | None) -> bool:
    """Whether the queue is (or, in a dry run, would be) as before the cycle."""
    if outcome is not None:
        return outcome.outcome in ("applied", "dry-run-ok")
    return restore.note.startswith("already as before")


def _leaders(settings: Settings, actuator: VolcanoActuator, audit: AuditLog) -> list[Leader]:
    from predictor.loop.leader import FileLock, LeaseLock, default_identity

    identity = f"{default_identity()}-rollback"  # never mistaken for the loop of the same pod
    lock = FileLock(audit.path.with_name(audit.path.name + ".lock"), identity)
    lease = LeaseLock(
        actuator.api_client,
        name=settings.loop.lease_name,
        namespace=settings.loop.lease_namespace,
        duration_s=settings.loop.lease_duration_s,
        identity=identity,
    )
    return [lock, lease]


def _send(
    actuator: VolcanoActuator, audit: AuditLog, restores: list[Restore], cycle: str, now: pd.Timestamp, *, apply: bool
) -> dict[str, Outcome]:
    """Send the restores (intent audited before each), audit every outcome; queue → outcome."""
    from predictor.actuators import Change

    by_queue = {r.queue: r for r in restores}

    def intent(change: Change) -> None:
        audit.append(_records(by_queue[change.target], cycle, now, "intent", apply))

    changes = [r.change for r in restores if r.change is not None]
    outcomes = actuator.apply_all(changes, dry_run=not apply, on_intent=intent) if changes else []
    records = []
    for o in outcomes:
        records += _records(by_queue[o.change.target], cycle, now, o.outcome, apply, o.message)
    audit.append(records)
    return {o.change.target: o for o in outcomes}


def _records(
    restore: Restore, cycle: str, now: pd.Timestamp, outcome: str, apply: bool, message: str = ""
) -> list[AuditRecord]:
    from predictor.actuators.audit import AuditRecord
    from predictor.loop.rollback import ROLLBACK

    return [
        AuditRecord(
            timestamp=now.isoformat(),
            cycle=cycle,
            queue=restore.queue,
            field=field,
            resource=resource,
            before=after,
            after=before,
            reason=f"rollback of cycle {cycle}" + (f": {message}" if message else ""),
            mode="apply" if apply else "server-dry-run",
            outcome=outcome,
            code=ROLLBACK,
            unix=now.timestamp(),
        )
        for field, resource, before, after, _ in restore.fields
    ]


def _table(restores: list[Restore], outcomes: dict[str, Outcome], cycle: str, apply: bool) -> Table:
    table = Table(title=f"rollback of cycle {cycle} ({'apply' if apply else 'dry run'})")
    for column in ("queue", "field", "cycle set", "now", "restore to", "outcome"):
        table.add_column(column)
    for r in restores:
        done = outcomes.get(r.queue)
        what = r.note or (f"{done.outcome}{': ' + done.message if done.message else ''}" if done else "")
        for field, resource, before, after, now in r.fields:
            name = "weight" if field == "weight" else f"{field}[{resource}]"
            table.add_row(
                r.queue,
                name,
                f"{after:g}",
                "unset" if now is None else f"{now:g}",
                "unset" if before is None else f"{before:g}",
                what,
            )
    return table


def _notify(settings: Settings, cycle: str, restores: list[Restore], outcomes: dict[str, Outcome]) -> None:
    from predictor.loop.notify import Notifier

    notifier = Notifier(settings.actuators.notify)
    done = [r.queue for r in restores if (o := outcomes.get(r.queue)) is not None and o.outcome == "applied"]
    if notifier.enabled and done:
        link = notifier.link(cycle)
        notifier.send(
            f"gpu-capacity-predictor: cycle {cycle} rolled back on {', '.join(done)}"
            + (f"\nplan: {link}" if link else "")
        )
