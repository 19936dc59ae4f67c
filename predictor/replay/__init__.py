"""Replays of real job traces under a quota policy: what a plan would have done to allocation, waits,
reclaim losses and goodput. Sits above the simulator and the planner (it drives one with the other)."""

from __future__ import annotations

from predictor.replay.run import POLICIES, ReplayResult, ReplaySettings, replay, replay_quotas, static_queues

__all__ = ["POLICIES", "ReplayResult", "ReplaySettings", "replay", "replay_quotas", "static_queues"]
