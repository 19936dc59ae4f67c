"""The loop's injection points that are not its inputs' readers (those are in ``inputs``), as Protocols.

``VolcanoActuator`` (over the Kubernetes API) satisfies ``QueueApi`` and ``QueueActuator``, and
``ModelRegistry`` (MLflow) satisfies ``ChampionRegistry``; the loop, ``KubeCluster`` and
``RegistryForecaster`` are typed with these instead, so a test, the replay benchmark or another
scheduler's actuator plugs in without subclassing (a Protocol at each seam).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from predictor.actuators import Change
from predictor.actuators.volcano import Outcome
from predictor.planner import QueuePlan

if TYPE_CHECKING:  # the registry (and MLflow behind it) loads only where a command uses it
    from predictor.registry import ModelVersionInfo
    from predictor.registry.served import ServedModel

__all__ = ["ChampionRegistry", "QueueActuator", "QueueApi"]


class QueueApi(Protocol):
    """Live reads: the Queue objects and the Node list (``kubectl get … -o json`` shapes)."""

    def list_queues(self) -> list[dict[str, Any]]: ...

    def list_nodes(self) -> Mapping[str, Any]: ...


class QueueActuator(Protocol):
    """Plan → apply for queue quotas: ``plan`` is ``[]`` once converged; ``apply_all`` reports every queue.

    ``retries``, ``get_queue`` and ``send_patch`` carry recommend-mode annotation patches
    (``predictor.actuators.recommend``) through the same reads and writes."""

    retries: int

    def get_queue(self, name: str) -> dict[str, Any]: ...

    def send_patch(self, name: str, body: Mapping[str, Any], *, dry_run: bool, what: str = "patch queue") -> None: ...

    def plan(self, desired: QueuePlan) -> list[Change]: ...

    def apply_all(
        self,
        changes: Sequence[Change],
        *,
        dry_run: bool = True,
        parents: Mapping[str, str | None] | None = None,
        on_intent: Callable[[Change], None] | None = None,
        still_leading: Callable[[], str] | None = None,
    ) -> list[Outcome]: ...


class ChampionRegistry(Protocol):
    """The served model of a family: its version record and the estimator (``ModelRegistry`` in production)."""

    def get(self, family: str) -> ModelVersionInfo | None: ...

    def load(self, family: str) -> ServedModel: ...
