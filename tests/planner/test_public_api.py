"""The public surface of the planner, the loop and the Volcano actuator, pinned (a change must be deliberate)."""

from __future__ import annotations

import predictor.actuators.volcano as volcano
import predictor.loop as loop
import predictor.planner as planner


def test_planner_public_api_is_pinned() -> None:
    assert sorted(planner.__all__) == sorted(
        [
            "MANAGED_ANNOTATION",
            "PROTECTED_QUEUES",
            "REASON_CODES",
            "CyclePlan",
            "FieldChange",
            "Hold",
            "Memory",
            "PlannerSettings",
            "QueueLimits",
            "QueuePlan",
            "QueueState",
            "Target",
            "allocatable_from_nodes",
            "apply_merge_patch",
            "capacity_drop",
            "check_invariants",
            "desired_object",
            "forecast_resources",
            "forecast_targets",
            "format_quantity",
            "from_milli",
            "gpu_nodes_not_ready",
            "merge_patch",
            "parse_quantity",
            "plan_cycle",
            "plan_queues",
            "queue_from_object",
            "queues_from_list",
            "stale_forecast",
            "stale_series",
            "targets_from_mapping",
            "touched_resources",
        ]
    )


def test_loop_and_actuator_public_api_is_pinned() -> None:
    assert sorted(loop.__all__) == sorted(
        [
            "ChampionRegistry",
            "ClusterReader",
            "CycleReport",
            "EstimatorForecaster",
            "FileCluster",
            "FileHistory",
            "FileLock",
            "Leader",
            "LeaseLock",
            "default_identity",
            "Forecaster",
            "HistoryReader",
            "KubeCluster",
            "Loop",
            "LoopMetrics",
            "MetricsServer",
            "Probed",
            "QueueActuator",
            "QueueApi",
            "RegistryForecaster",
            "SourceHistory",
            "SourceWorkload",
            "WorkloadReader",
            "cycle_slot",
            "wait_for_next_cycle",
        ]
    )
    assert sorted(volcano.__all__) == [
        "GROUP",
        "Outcome",
        "PLURAL",
        "PlanDirMemo",
        "VERSION",
        "VolcanoActuator",
        "connect",
        "write_plan_dir",
    ]
