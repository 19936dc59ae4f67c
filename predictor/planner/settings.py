"""The planner's policy knobs, as one pydantic section (``planner:`` in the settings file).

Defaults are the documented behaviour of ``predictor plan`` without ``--config``: size ``deserved`` ahead
of demand, at the forecast's 80 % quantile (``tail_quantile``) over the next 24 h with 10 % headroom,
``capability`` = the live allocatable GPUs (``borrow: idle``; ``borrow: forecast`` sizes it from the
upper 95 % bound instead), guarantee from the lower 80 % floor, a dead band of 1 GPU or 10 %, at most
8 GPUs or 50 % per cycle, a 1 h cooldown, and a 6 h shrink stabilisation window against none for growth
(HPA ``behavior``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from predictor.planner.objective import Objective
from predictor.planner.tail import DEFAULT_TAIL_QUANTILE, check_tail_quantile

__all__ = ["PROTECTED_QUEUES", "PlannerSettings", "QueueLimits"]

PROTECTED_QUEUES = ("root", "default")
Quantile = Literal["mean", "lo-80", "hi-80", "lo-95", "hi-95"]


class QueueLimits(BaseModel):
    """Per-queue clamps in GPUs (all optional)."""

    model_config = ConfigDict(extra="forbid")

    min_deserved: float = Field(0.0, ge=0, description="Lowest deserved the planner may set.")
    max_deserved: float | None = Field(None, ge=0, description="Highest deserved the planner may set.")
    max_capability: float | None = Field(None, ge=0, description="Highest capability the planner may set.")
    min_guarantee: float = Field(0.0, ge=0, description="Lowest guarantee the planner may set.")

    @model_validator(mode="after")
    def _ordered(self) -> QueueLimits:
        if self.max_deserved is not None and self.max_deserved < self.min_deserved:
            raise ValueError("max_deserved is below min_deserved")
        return self


_NO_LIMITS = QueueLimits()  # type: ignore[call-arg]


class PlannerSettings(BaseModel):
    """How forecasts become queue quotas, and the safety policy that bounds every change."""

    model_config = ConfigDict(extra="forbid")

    plugin: Literal["capacity", "proportion"] = Field(
        "capacity", description="Volcano plugin: capacity uses spec.deserved, proportion uses spec.weight."
    )
    resource: str = Field("nvidia.com/gpu", description="Resource name when the forecast has no resource column.")
    horizon_h: float = Field(24.0, gt=0, le=24 * 14, description="Forecast hours that size the next period.")
    tail_quantile: float | None = Field(
        DEFAULT_TAIL_QUANTILE,
        description="Size deserved ahead of forecast demand: the highest q quantile of the forecast's distribution "
        "over the horizon (interpolated in normal score between its bands; predictor.planner.tail), so a queue's "
        "own work does not wait behind borrowers. Strictly between 0.5 and 0.99 (neither allowed): higher is "
        "more deserved, less wait and more idle quota; lower returns quota to the other queues' shares. "
        "null: deserved_quantile's column instead (also when deserved_quantile is set and this is not). "
        "planner.objective, when set, wins over both (docs/design.md, 'Deserved from the forecast's distribution').",
    )
    deserved_quantile: Quantile = Field(
        "hi-80",
        description="Forecast column that sizes deserved when tail_quantile is null (or not set while this is).",
    )
    capability_quantile: Quantile = Field("hi-95", description="Forecast column that sizes capability.")
    guarantee_quantile: Quantile = Field("lo-80", description="Forecast column whose minimum is the floor.")
    set_guarantee: bool = Field(True, description="Manage spec.guarantee from the queue's steady floor.")
    borrow: Literal["idle", "forecast"] = Field(
        "idle",
        description="How capability is sized. idle (the default): the live allocatable GPUs, so a queue borrows any "
        "GPU no other queue's guarantee reserves, as elastic quotas do, and Volcano's reclaim returns it when the "
        "lender's demand comes back; deserved and guarantee still come from the forecast, so what is reclaimable "
        "follows the forecast. forecast: capability_quantile plus headroom, which caps borrowing at the "
        "forecast's upper bound (docs/design.md, 'Borrowing'). Either way a queue with spec.reclaimable: false "
        "borrows nothing: its capability target is its deserved.",
    )
    deserved_below_allocated: bool = Field(
        False,
        description="With borrow: idle, plan a reclaimable queue's deserved below what it holds when the forecast "
        "says so, so the GPUs it holds above deserved are reclaimable by queues below their share. Off by default: "
        "deserved never goes below allocated, and once the forecast has grown a queue's deserved to what it holds "
        "that queue gives nothing back, so on an over-committed cluster reclaim finds no victim (docs/design.md, "
        "'Borrowing': in replay it cuts the p95 wait but costs reclaim-lost GPU-hours on Philly).",
    )
    guarantee_within_demand: bool = Field(
        False,
        description="Never plan a guarantee above what the queue holds or its pending gangs ask for now (where the "
        "queue state says what is pending; else what it holds). A guarantee is withheld from every other queue "
        "(Volcano's realCapability = total − Σ guarantee + own), so a guaranteed GPU nobody in the queue asks for "
        "sits idle while other queues' jobs wait (docs/design.md, 'Guarantees nobody asks for').",
    )
    pending_raise: Literal["off", "target", "lift"] = Field(
        "off",
        description="Raise a waiting queue's deserved toward what its pending gangs ask for (allocated + pending GPUs) "
        "in one cycle, without the max step, dead band, grow window or cooldown: a raise only lets Volcano's reclaim "
        "act for a queue that waits; cuts keep every limit, since they evict. target: up to the queue's (fitted) "
        "deserved target at most; lift: the target itself is lifted to allocated + pending (capped by the "
        "capability target and pool) before Σ deserved is fitted to the cluster. Raises share the room Σ deserved "
        "leaves in the cluster, unless fit_deserved_to_cluster is false (docs/design.md, 'Reaction time').",
    )
    react_pending_gpus: float = Field(
        0.0,
        ge=0,
        description="Event-driven re-plan (0: off): a loop plans again between its hourly cycles when a queue has "
        "had at least this many GPUs pending, and more allocated + pending than its deserved, for react_after_s "
        "(predictor.planner.react). Honoured by the replay's loop (predictor replay, bench/replay.py), which "
        "re-plans from the same forecast, and by predictor loop, which reads queues and pending GPUs every "
        "loop.react_poll_s between its slots and asks the served model again (predictor.loop.react; "
        "planner.resource nvidia.com/gpu only).",
    )
    react_after_s: float = Field(600.0, ge=0, description="How long pending must last before an event re-plan.")
    headroom: float = Field(0.10, ge=0, le=2, description="Fraction added to deserved and capability targets.")
    fit_deserved_to_cluster: bool = Field(
        True,
        description="Scale leaf queues' deserved targets down in proportion when their sum exceeds the live "
        "allocatable GPUs: shares beyond the cluster cannot all be honoured, and the largest forecast would "
        "otherwise take the idle quota the report counts. false suits a loop that re-plans hourly: each queue's "
        "forecast work stays its own, so far less is reclaimed, at some cost in wait; quotas held for a week "
        "starve more that way (docs/design.md, 'Shares beyond the cluster').",
    )
    round_to: int = Field(1, ge=1, le=64, description="Round quotas to this many GPUs (gang/node boundary).")
    dead_band_abs: float = Field(1.0, ge=0, description="Ignore a change smaller than this many GPUs ...")
    dead_band_rel: float = Field(0.10, ge=0, le=1, description="... or than this fraction of the current value.")
    max_step_abs: float = Field(8.0, gt=0, description="Largest change per cycle in GPUs ...")
    max_step_rel: float = Field(0.5, gt=0, le=10, description="... or as a fraction of the current value (larger).")
    cooldown_s: float = Field(3600.0, ge=0, description="Seconds after a queue's last change before the next.")
    grow_window_s: float = Field(0.0, ge=0, description="Growth uses the lowest recommendation in this window.")
    shrink_window_s: float = Field(
        6 * 3600.0, ge=0, description="Shrinking uses the highest recommendation in this window (slower)."
    )
    stale_after_s: float = Field(
        7200.0,
        gt=0,
        description="Hold data older than this many seconds at planning time: a queue whose own newest "
        "history sample is older is held (stale_data) while the others are planned, and every queue is held "
        "when all are, or when the forecast's first step is older (a forecast that ends before now is stale "
        "too). The one staleness threshold of queue planning; loop.stale_after_s is its deprecated "
        "old name. The XDP agent's policy has its own (agent.policy.stale_after_s).",
    )
    capacity_drop_hold: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Hold every queue (code capacity_drop) when a resource's live allocatable GPUs fall by more "
        "than this fraction below the reference the loop recorded (the high-water mark of allocatable over "
        "capacity_reference_window_s, so a collapse in small steps holds as surely as one in a single step), "
        "or are zero (an empty node list, every node NotReady): a collapse of the node list must not scale "
        "every guarantee down to nothing. The loop accepts a lasting reduction as the new reference after "
        "capacity_drop_accept_s of holding, unless it is zero.",
    )
    capacity_reference_window_s: float = Field(
        7 * 86400.0,
        gt=0,
        description="How far back the capacity reference looks: the most allocatable GPUs seen in this window "
        "(hourly maxima kept in the loop's state file).",
    )
    capacity_fresh_not_ready: float = Field(
        0.5,
        gt=0,
        le=1,
        description="With no capacity reference yet (a first deploy, a lost state volume), hold every queue "
        "(code capacity_drop) when more than this share of GPU nodes is NotReady or cordoned.",
    )
    capacity_drop_accept_s: float = Field(
        6 * 3600.0,
        ge=0,
        description="Seconds a capacity drop holds before the loop takes the lower capacity as "
        "the new reference (a zero capacity always holds).",
    )
    allocated_milli_units: bool = Field(
        False, description="status.allocated holds milli-units (Volcano builds that write 8k for 8 GPUs)."
    )
    queues: dict[str, QueueLimits] = Field(default_factory=dict, description="Per-queue clamps by name.")
    objective: Objective | None = Field(
        None,
        description="Size deserved and guarantee as the newsvendor optimum of these costs (docs/design.md, "
        "predictor.planner.objective) instead of tail_quantile and the fixed quantile columns.",
    )
    high_priority: int = Field(
        1000,
        description="Pods with spec.priority at or above this are high priority: their steady (recurring) "
        "GPUs bound the guarantee when job data is known (predictor.planner.gangs).",
    )

    @field_validator("tail_quantile")
    @classmethod
    def _tail_range(cls, value: float | None) -> float | None:
        return None if value is None else check_tail_quantile(value)

    @model_validator(mode="after")
    def _one_deserved_source(self) -> PlannerSettings:
        # An explicit column must not be silently overridden by tail_quantile's default. Given both (a dumped
        # model is), a tail_quantile that is not null wins, so a model round-trips through model_dump().
        given = self.model_fields_set
        if "deserved_quantile" in given and "tail_quantile" not in given:
            self.tail_quantile = None
        return self

    @model_validator(mode="after")
    def _windows(self) -> PlannerSettings:
        if self.shrink_window_s < self.grow_window_s:
            raise ValueError("shrink_window_s must be at least grow_window_s (shrink slower than grow)")
        return self

    def limits(self, queue: str) -> QueueLimits:
        return self.queues.get(queue) or _NO_LIMITS  # shared and only read: not one model built per queue
