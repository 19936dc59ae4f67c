"""The Volcano queue actuator: a desired ``QueuePlan`` → one merge patch per queue, safely.

Reads and writes ``queues.scheduling.volcano.sh/v1beta1`` (cluster-scoped) through the official
``kubernetes`` client. Every patch carries the resourceVersion it was planned against, so a queue edited
in between is never overwritten blindly (409 → fresh read → go on only if the quota fields are still the
ones planned from, and the new ``status.allocated`` still allows the change). Each patched object is
validated against the bundled CRD schema and the webhook's ordering rule before it is sent. Shrinking
queues are patched first (deepest first) and growing ones after (parents first), so a hierarchy never
holds more than its parent while a plan is half-applied; after a failed growth the rest of the growth is
skipped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from predictor.actuators import Change
from predictor.actuators.schemas import validate_object
from predictor.atomicio import Signature
from predictor.errors import ActuatorError, InputError, TemporaryActuatorError
from predictor.planner import FieldChange, QueuePlan, apply_merge_patch, merge_patch, parse_quantity, touched_resources
from predictor.planner.state import FIELDS

__all__ = ["GROUP", "PLURAL", "VERSION", "Outcome", "PlanDirMemo", "VolcanoActuator", "connect", "write_plan_dir"]

GROUP, VERSION, PLURAL = "scheduling.volcano.sh", "v1beta1", "queues"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class Outcome:
    """What happened to one queue's patch."""

    change: Change
    outcome: str  # applied | dry-run-ok | rejected | conflict | failed | skipped
    message: str = ""


def connect(kubeconfig: Path | None = None, context: str | None = None) -> client.ApiClient:
    """An API client from in-cluster credentials, else the kubeconfig (``$KUBECONFIG`` / ``~/.kube/config``)."""
    configuration = client.Configuration()
    if kubeconfig is not None and not Path(kubeconfig).is_file():  # the client would say "No configuration found"
        raise ActuatorError(f"kubeconfig {kubeconfig}: no such file")
    try:
        if kubeconfig is None and context is None:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            raise ConfigException("kubeconfig requested")
    except ConfigException:
        try:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(kubeconfig) if kubeconfig else None,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        except (ConfigException, OSError) as exc:
            raise ActuatorError(f"cannot load Kubernetes credentials: {exc}".splitlines()[0]) from exc
    return client.ApiClient(configuration)


def _spec_values(spec: Mapping[str, Any], resources: Sequence[str]) -> dict[str, dict[str, float | None]]:
    """The three quota fields of ``resources`` from a spec, parsed (None where unset)."""
    sources = {
        "deserved": spec.get("deserved") or {},
        "capability": spec.get("capability") or {},
        "guarantee": (spec.get("guarantee") or {}).get("resource") or {},
    }
    out: dict[str, dict[str, float | None]] = {}
    for name in FIELDS:
        out[name] = {
            r: (parse_quantity(sources[name][r], what=f"{name}[{r}]") if r in sources[name] else None)
            for r in resources
        }
    return out


def _depth(name: str, parents: Mapping[str, str | None]) -> int:
    seen, node, d = {name}, parents.get(name), 0
    while node is not None and node not in seen:
        seen.add(node)
        node, d = parents.get(node), d + 1
    return d


class VolcanoActuator:
    """``plan(QueuePlan) -> [Change]`` and ``apply(changes, dry_run=…)`` for Volcano queues."""

    name = "volcano"

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        timeout_s: float = 10.0,
        retries: int = 3,
        field_manager: str = "gpu-capacity-predictor",
    ) -> None:
        self.api_client = api_client
        self.api = client.CustomObjectsApi(api_client)
        self.timeout_s = timeout_s
        self.retries = retries
        self.field_manager = field_manager

    # -- reads ---------------------------------------------------------------------------------------
    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, _request_timeout=self.timeout_s, **kwargs)
        except ApiException as exc:
            message = _status_message(exc)
            if exc.status in (409, 429) or (exc.status or 0) >= 500:
                raise TemporaryActuatorError(f"{what}: HTTP {exc.status} {message}") from exc
            raise ActuatorError(f"{what}: HTTP {exc.status} {message}") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TemporaryActuatorError(f"{what}: {type(exc).__name__}: {exc}".splitlines()[0]) from exc

    def list_queues(self) -> list[dict[str, Any]]:
        """Every Queue object, with status (as ``kubectl get queues -o json`` prints its items)."""
        doc = self._call("list queues", self.api.list_cluster_custom_object, GROUP, VERSION, PLURAL)
        items: list[dict[str, Any]] = list(doc.get("items") or [])
        return items

    def list_nodes(self) -> dict[str, Any]:
        """The Node list as plain data (``kubectl get nodes -o json``), for live allocatable GPUs."""
        nodes = self._call("list nodes", client.CoreV1Api(self.api_client).list_node)
        data: dict[str, Any] = self.api_client.sanitize_for_serialization(nodes)  # type: ignore[no-untyped-call]
        return data

    def get_queue(self, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = self._call(
            f"get queue {name}", self.api.get_cluster_custom_object, GROUP, VERSION, PLURAL, name
        )
        return obj

    def send_patch(self, name: str, body: Mapping[str, Any], *, dry_run: bool, what: str = "patch queue") -> None:
        """One merge patch of queue ``name`` (``dryRun=All`` when ``dry_run``); errors mapped as every call's."""
        self._call(
            f"{what} {name}",
            self.api.patch_cluster_custom_object,
            GROUP,
            VERSION,
            PLURAL,
            name,
            body,
            dry_run="All" if dry_run else None,
            field_manager=self.field_manager,
            _content_type=MERGE_PATCH,
        )

    # -- plan ----------------------------------------------------------------------------------------
    def plan(self, desired: QueuePlan) -> list[Change]:
        """One ``patch-queue`` change per queue the plan changes (``[]`` once converged)."""
        changes = []
        for queue in desired.changed_queues():
            state = desired.desired[queue]
            resources = sorted(touched_resources(desired.changes, queue))
            weight = any(c.queue == queue and c.field == "weight" for c in desired.changes)
            after = merge_patch(state, resources, weight=weight)["spec"]
            before_spec: dict[str, Any] = {}
            # The quota values planned from: a changed field's "before", else its (unchanged) desired value.
            planned: dict[str, dict[str, float | None]] = {
                f: {r: state.get(f).get(r) for r in resources} for f in FIELDS
            }
            for c in desired.changes:
                if c.queue != queue:
                    continue
                if c.field == "weight":
                    before_spec["weight"] = int(c.before or 1)
                elif c.resource in resources:
                    planned[c.field][c.resource] = c.before
            reasons = "; ".join(
                f"{c.field}[{c.resource}] {c.before}→{c.after}: {c.reason}"
                for c in desired.changes
                if c.queue == queue and c.field != "weight"
            )
            changes.append(
                Change(
                    actuator=self.name,
                    target=queue,
                    action="patch-queue",
                    before={
                        "resourceVersion": state.resource_version,
                        "resources": resources,
                        "spec": before_spec,
                        "planned": planned,
                        "deserved_below_allocated": queue in desired.below_allocated,
                    },
                    after={"spec": after},
                    reason=reasons,
                )
            )
        return changes

    # -- apply ---------------------------------------------------------------------------------------
    def apply(self, changes: Sequence[Change], *, dry_run: bool = True) -> list[Change]:
        """Patch every queue (``dryRun=All`` when ``dry_run``); returns the changes that went through."""
        return [o.change for o in self.apply_all(changes, dry_run=dry_run) if o.outcome in ("applied", "dry-run-ok")]

    def apply_all(
        self,
        changes: Sequence[Change],
        *,
        dry_run: bool = True,
        parents: Mapping[str, str | None] | None = None,
        on_intent: Callable[[Change], None] | None = None,
        still_leading: Callable[[], str] | None = None,
    ) -> list[Outcome]:
        """Patch in a safe order and report every queue's outcome; ``on_intent(change)`` runs before a send.

        ``still_leading()`` runs before every patch after the first: a non-empty answer (this loop lost its
        Lease mid-apply) skips the rest, so two leaders never interleave the patches of one plan.
        """
        parents = parents or {}
        growing = {c.target for c in changes if _grows(c)}
        ordered = sorted((c for c in changes if c.target not in growing), key=lambda c: -_depth(c.target, parents))
        ordered += sorted((c for c in changes if c.target in growing), key=lambda c: _depth(c.target, parents))
        outcomes: list[Outcome] = []
        stop = False
        lost = ""
        for index, change in enumerate(ordered):
            if not lost and index > 0 and still_leading is not None:
                lost = still_leading()
            if lost:
                outcomes.append(Outcome(change, "skipped", f"no longer the leader: {lost}"))
                continue
            if stop and change.target in growing:
                outcomes.append(Outcome(change, "skipped", "an earlier growth patch failed"))
                continue
            if on_intent is not None:
                on_intent(change)
            outcome = self._apply_one(change, dry_run)
            outcomes.append(outcome)
            if outcome.outcome not in ("applied", "dry-run-ok") and change.target in growing:
                stop = True
        return outcomes

    def _apply_one(self, change: Change, dry_run: bool) -> Outcome:
        name = change.target
        after_spec: Mapping[str, Any] = change.after["spec"]
        resources = list(change.before.get("resources") or [])
        version = change.before.get("resourceVersion")
        last = ""
        for _ in range(self.retries + 1):
            try:
                live = self.get_queue(name)
            except ActuatorError as exc:
                last = str(exc)
                if isinstance(exc, TemporaryActuatorError):
                    continue
                return Outcome(change, "failed", last)
            meta = live.get("metadata") or {}
            spec = live.get("spec") or {}
            if _spec_values(spec, resources) == _spec_values(after_spec, resources) and all(
                spec.get(k) == v for k, v in after_spec.items() if k == "weight"
            ):
                return Outcome(change, "dry-run-ok" if dry_run else "applied", "live queue already as desired")
            if version is not None and meta.get("resourceVersion") != version:
                problem = self._still_safe(change, live, resources)
                if problem:
                    return Outcome(change, "conflict", problem)
            body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "spec": dict(after_spec)}
            patched = apply_merge_patch(live, body)
            try:
                validate_object(patched)
                _check_order(patched, resources)
            except ActuatorError as exc:
                return Outcome(change, "rejected", f"not sent: {exc}")
            try:
                self.send_patch(name, body, dry_run=dry_run)
            except TemporaryActuatorError as exc:
                last = str(exc)  # 409, timeout, 5xx: re-read and decide again (resourceVersion keeps it idempotent)
                continue
            except ActuatorError as exc:
                return Outcome(change, "rejected", str(exc))
            return Outcome(change, "dry-run-ok" if dry_run else "applied")
        return Outcome(change, "failed", f"gave up after {self.retries + 1} tries: {last}")

    @staticmethod
    def _still_safe(change: Change, live: Mapping[str, Any], resources: Sequence[str]) -> str:
        """Why the planned patch may no longer be sent to ``live`` ('' when it still may)."""
        planned_from = change.before.get("planned") or {}
        spec = live.get("spec") or {}
        if planned_from and _spec_values(spec, resources) != planned_from:
            return "quota fields changed since the plan was made; replanning next cycle"
        allocated = (live.get("status") or {}).get("allocated") or {}
        after = _spec_values(change.after["spec"], resources)
        now = _spec_values(spec, resources)
        # A deserved planned below allocated on purpose (planner.deserved_below_allocated) is the plan, not a race.
        fields = ("capability",) if change.before.get("deserved_below_allocated") else ("deserved", "capability")
        for r in resources:
            held = parse_quantity(allocated[r], what=f"allocated[{r}]") if r in allocated else 0.0
            for name in fields:
                new, old = after[name][r], now[name][r]
                if new is not None and new < (held if old is None else min(old, held)) - 1e-9:
                    return f"{name}[{r}] {new:g} is now below allocated {held:g}; replanning next cycle"
        return ""


def _grows(change: Change) -> bool:
    planned = change.before.get("planned") or {}
    after = (change.after.get("spec") or {}).get("deserved") or {}
    before = planned.get("deserved") or {}
    return any(before.get(r) is None or parse_quantity(v, what=r) > (before.get(r) or 0.0) for r, v in after.items())


def _check_order(obj: Mapping[str, Any], resources: Sequence[str]) -> None:
    values = _spec_values(obj.get("spec") or {}, resources)
    name = (obj.get("metadata") or {}).get("name", "?")
    for r in resources:
        g, d, c = (values[f][r] for f in FIELDS)
        if g is not None and (d is None or g > d):
            raise ActuatorError(f"queue {name!r}: guarantee[{r}] {g:g} exceeds deserved {d}")
        if d is not None and c is not None and d > c:
            raise ActuatorError(f"queue {name!r}: deserved[{r}] {d:g} exceeds capability {c:g}")


def _status_message(exc: ApiException) -> str:
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        return str(exc.reason or "")
    return str(body.get("message") or exc.reason or "") if isinstance(body, dict) else str(exc.reason or "")


def _is_queue_file(path: Path) -> bool:
    """A Queue object this writer could have written (only those are removed: a user's own YAML stays)."""
    import yaml

    try:
        obj = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return (
        isinstance(obj, dict) and obj.get("kind") == "Queue" and str(obj.get("apiVersion", "")).startswith(f"{GROUP}/")
    )


@dataclass
class PlanDirMemo:
    """What ``write_plan_dir`` rendered and found on disk last time, kept by a caller that writes every cycle.

    Why: a fleet cycle renders 2,000 queue files, nearly all as they were; rendering one (the desired
    object, then YAML) costs about a millisecond. ``texts``: queue → (the content of what it was rendered
    from, the text), so a queue whose live object, desired state and changes are unchanged is not rendered
    again; ``files``: ``predictor.atomicio.write_texts``'s memo of the files on disk.
    """

    texts: dict[str, tuple[str, str]] = field(default_factory=dict)
    files: dict[Path, tuple[Signature, bytes]] = field(default_factory=dict)
    plan_file: dict[Path, tuple[Signature, bytes]] = field(default_factory=dict)  # plan.json's


_KEY = json.JSONEncoder(default=lambda o: f"{type(o).__name__}:{o!r}")  # one encoder for every queue's key


def _content(live: Mapping[str, Any], state: Any, changes: Sequence[Any]) -> str:
    """A key equal only for inputs that render equal: the live object in its key order, the state, the changes."""
    return _KEY.encode(live) + repr(state) + repr(changes)


def write_plan_dir(
    plan: QueuePlan,
    live: Sequence[Mapping[str, Any]],
    out: Path,
    *,
    models: Mapping[str, str] | None = None,
    memo: PlanDirMemo | None = None,
) -> Path:
    """``out/plan.json`` and ``out/queues/<name>.yaml`` (full desired object per managed queue), atomically.

    Each file goes through ``predictor.atomicio``; every name is a checked queue name placed with
    ``child_paths``, so nothing lands outside ``out``. Plan files of queues no longer planned are deleted
    after the new ones are written (``queues/`` then holds exactly this plan), and ``plan.json`` is written
    last: a reader who sees the new ``plan.json`` sees the matching queue files. ``models`` (family → model
    URI served, e.g. ``{"gpu-forecast": "models:/gpu-forecast/7"}``) goes into ``plan.json`` as ``models``.
    ``memo``: the loop's, so unchanged queues are neither rendered nor read again and an unchanged
    ``plan.json`` is not rewritten (``PlanDirMemo``).
    """
    import yaml

    from predictor.atomicio import child_path, child_paths, fsync_directory, write_text, write_texts
    from predictor.planner import desired_object
    from predictor.planner.state import check_queue_name

    by_name = {str((o.get("metadata") or {}).get("name")): o for o in live}
    directory = out / "queues"
    if directory.is_symlink():  # a link could lead the files (and the clean-up below) anywhere
        raise InputError(f"{directory} is a symbolic link; the plan's queues/ must be a real directory")
    changes: dict[str, list[FieldChange]] = {}
    for c in plan.changes:  # each queue's own (desired_object would scan every change once per queue)
        changes.setdefault(c.queue, []).append(c)
    names = sorted(plan.desired)
    paths = child_paths(directory, [check_queue_name(name, source="plan") + ".yaml" for name in names])
    files: dict[Path, str] = {}
    texts: dict[str, tuple[str, str]] = {}
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml when present: 1,000 queues in well under 1 s
    for name, path in zip(names, paths, strict=True):
        state, obj, mine = plan.desired[name], by_name.get(name, {"metadata": {"name": name}}), changes.get(name, [])
        key = _content(obj, state, mine) if memo is not None else ""
        known = memo.texts.get(name) if memo is not None else None
        if known is not None and known[0] == key:
            texts[name] = known
        else:
            texts[name] = (key, yaml.dump(desired_object(obj, state, mine), Dumper=dumper, sort_keys=False))
        files[path] = texts[name][1]
    # unchanged queue files are not rewritten; the directory is synced once
    write_texts(files, memo=memo.files if memo is not None else None)
    if memo is not None:
        memo.texts = texts
    written = {path.name for path in files}
    if directory.is_dir():
        stale = [
            p
            for p in directory.glob("*.yaml")
            if p.name not in written and p.is_file() and not p.is_symlink() and _is_queue_file(p)
        ]
        for path in stale:
            path.unlink(missing_ok=True)
        if stale:
            fsync_directory(directory)
    doc = plan.to_json()
    if models is not None:
        doc["models"] = dict(sorted(models.items()))
    target, text = child_path(out, "plan.json"), json.dumps(doc, indent=2) + "\n"
    if memo is not None:  # the same plan again (plan mode, nothing applied): the file is left as it is
        write_texts({target: text}, memo=memo.plan_file)
        return target
    return write_text(target, text)
