"""How the loop waits for its next interval slot: renewing its locks, and with ``planner.react_pending_gpus``
on, polling for waiting queues on a schedule of its own (``predictor.loop.react`` says what a poll does).

One module for both waits, so ``Loop.run_forever`` and ``FleetLoop.run_forever`` share them, and the cycle
and the react watch stay one idea each.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

__all__ = ["wait_and_watch", "wait_for_next_cycle"]


def wait_for_next_cycle(
    interval_s: float,
    clock: Callable[[], pd.Timestamp],
    stop: Callable[[], bool],
    sleep: Callable[[float], object],
    renew_every_s: float,
    *,
    renew: Callable[[], object],
) -> None:
    """Sleep to the next interval slot in steps of at most ``renew_every_s``, calling ``renew`` between steps."""
    wait = interval_s - (clock().timestamp() % interval_s) + 0.001
    steps = max(1, math.ceil(wait / renew_every_s))
    for step in range(steps):
        sleep(wait / steps)
        if stop():
            break
        if step < steps - 1:
            renew()


_EARLY_S = 0.001  # a step ends on the due time; a clock read a hair before it still counts as due
_TICK_S = 1e-6  # closer than this is there (the slot's end is 1 ms past its boundary)


def wait_and_watch(
    interval_s: float,
    clock: Callable[[], pd.Timestamp],
    stop: Callable[[], bool],
    sleep: Callable[[float], object],
    *,
    renew_every_s: float,
    poll_s: float,
    renew: Callable[[], str],
    watch: Callable[[], object],
) -> None:
    """``wait_for_next_cycle`` that also calls ``watch`` every ``poll_s`` while ``renew`` says this loop leads.

    The locks are renewed every ``renew_every_s`` and the watch polls every ``poll_s``, each on its own
    schedule: a short poll period costs no extra Lease calls, and a long one is kept exactly (not rounded up
    to a renewal step). Each sleep ends at whichever is due next, or at the slot, so time spent re-planning
    does not delay the slot. In all it never sleeps longer than the wait it began with, so a clock that
    stands still or steps back still ends the wait; after a step back nothing is due later than one period.
    """
    start = clock().timestamp()
    wait = interval_s - (start % interval_s) + 0.001
    end, slept = start + wait, 0.0
    next_renew, next_poll = start + renew_every_s, start + poll_s
    leading: bool | None = None  # unknown until this wait's first renewal
    while True:
        now = clock().timestamp()
        next_renew, next_poll = min(next_renew, now + renew_every_s), min(next_poll, now + poll_s)
        # Differences, never absolute times: a step of less than a timestamp's resolution must still count.
        step = min(next_renew - now, next_poll - now, end - now, wait - slept)
        step = step if step >= _TICK_S else 0.0  # something is due (or the wait is over): no sleep
        if step:
            sleep(step)
            slept += step
        expected, now = now + step, clock().timestamp()
        if now < expected:  # the clock stepped back while asleep: what was due is due now
            next_renew, next_poll = next_renew - (expected - now), next_poll - (expected - now)
        if stop() or now >= end - _TICK_S or slept >= wait - _TICK_S:
            break
        poll = now >= next_poll - _EARLY_S
        if now >= next_renew - _EARLY_S or (poll and leading is None):  # only a leader polls: renew first
            leading = not renew()
            next_renew = now + renew_every_s
        if poll:
            if leading:
                watch()
            next_poll = clock().timestamp() + poll_s
