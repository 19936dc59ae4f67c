"""Bad inputs of loop --once on files, and predictor demand."""

from __future__ import annotations

import pytest

from tests.actuators.fake_apiserver import queue_object
from tests.predictor.bad_inputs.inputs import (
    Args,
    Files,
    Spoil,
    add,
    demand,
    history_csv,
    loop,
    queues_json,
    quota,
    write,
)
from tests.predictor.bad_inputs.runner import Case, ids, params, run_case

CASES = [
    # loop --once on files
    Case("loop-history-negative", loop, write("history.csv", history_csv([-3.0] * 48)), "negative"),
    Case("loop-history-nan", loop, write("history.csv", history_csv([*[4.0] * 47, "nan"])), "NaN"),
    Case("loop-history-inf", loop, write("history.csv", history_csv(["inf"] * 48)), "infinite"),
    Case("loop-history-bad-timestamp", loop, write("history.csv", history_csv(times=["soon"] * 48)), "timestamp"),
    Case(
        "loop-queues-escaping",
        loop,
        write("queues.json", queues_json(queue_object("../x", deserved=1, capability=1))),
        "not a valid queue name",
    ),
    Case("loop-quota-1e400", loop, write("queues.json", queues_json(quota("deserved", "1e400"))), "too large"),
    Case("loop-xdp-without-targets", loop, add("settings.yaml", "loop: {xdp: {enabled: true}}\n"), "loop.xdp.targets"),
    Case(
        "loop-xdp-capacity-negative",
        loop,
        add("settings.yaml", "loop: {xdp: {enabled: true, targets: [eth1], capacity_bps: -5}}\n"),
        "loop.xdp.capacity_bps",
    ),
    Case(
        "loop-xdp-capacity-inf",
        loop,
        add("settings.yaml", "loop: {xdp: {enabled: true, targets: [eth1], capacity_bps: .inf}}\n"),
        "loop.xdp.capacity_bps",
    ),
    Case("loop-bad-interval", lambda f: [*loop(f), "--interval", "often"], None, "--interval"),
    Case("loop-missing-history", loop, lambda f: f["history.csv"].unlink(), "no such file"),
    Case("loop-unknown-model", lambda f: [*loop(f), "--model", "nosuch"], None, "unknown forecaster"),
    # predictor demand: the pending-jobs file, the registry
    Case(
        "demand-pending-missing-column",
        demand,
        write("pending.csv", "series_id,timestamp\nteam-a,2026-11-02\n"),
        "pending.csv: missing column",
    ),
    Case("demand-pending-nan", demand, write("pending.csv", history_csv([*[1.0] * 47, "nan"])), "pending.csv"),
    Case("demand-pending-negative", demand, write("pending.csv", history_csv([-2.0] * 48)), "negative"),
    Case(
        "demand-pending-is-a-dir",
        demand,
        lambda f: (f["pending.csv"].unlink(), f["pending.csv"].mkdir()),
        "pending.csv: is a directory",
    ),
    Case("demand-no-such-registry", demand, None, "no such database file"),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("args", "spoil", "says"), params(CASES), ids=ids(CASES))
def test_bad_input(files: Files, capsys: pytest.CaptureFixture[str], args: Args, spoil: Spoil, says: str) -> None:
    run_case(files, capsys, args, spoil, says)
