"""Bad inputs of loop --once on files, and predictor demand."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from tests.actuators.fake_apiserver import queue_object
from tests.predictor.bad_inputs.inputs import (
    YEAR_2300,
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
from tests.support.localprom import free_port

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
    Case(
        "loop-diagnose-window-of-one-step",
        loop,
        add("settings.yaml", "loop: {diagnose: {enabled: true, window_s: 60, step_s: 60}}\n"),
        "loop.diagnose",
    ),
    # NaN passes every bound check; without the finite check the line blamed the upper bound
    Case(
        "loop-diagnose-window-nan",
        loop,
        add("settings.yaml", "loop: {diagnose: {enabled: true, window_s: .nan}}\n"),
        "finite number",
    ),
    Case(
        "loop-metrics-file-without-once",
        lambda f: (
            [a for a in loop(f) if a != "--once"] + ["--metrics-file", str(f["settings.yaml"].with_name("m.prom"))]
        ),
        None,
        "--metrics-file goes with --once",
    ),
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
    # an MLflow that is not there: refused within the bounded retries, as one line
    Case(
        "demand-mlflow-refused",
        demand,
        lambda f: f["mlflow.yaml"].write_text(f"mlflow: {{tracking_uri: 'http://127.0.0.1:{free_port()}'}}\n"),
        "(http://127.0.0.1:",
    ),
    Case(
        "loop-history-year-2300",
        loop,
        write(
            "history.csv",
            history_csv(times=YEAR_2300),
        ),
        "outside",
    ),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("args", "spoil", "says"), params(CASES), ids=ids(CASES))
def test_bad_input(files: Files, capsys: pytest.CaptureFixture[str], args: Args, spoil: Spoil, says: str) -> None:
    run_case(files, capsys, args, spoil, says)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel completes them) and never answers a byte."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield int(sock.getsockname()[1])


@pytest.mark.timeout(30)
def test_an_mlflow_that_never_answers_fails_within_the_configured_time(
    files: Files, capsys: pytest.CaptureFixture[str], silent_port: int
) -> None:
    """``mlflow.http_timeout_s`` × (``http_retries`` + 1) plus the backoff bounds the wait (MLflow's own
    defaults would block for minutes)."""
    settings = f"mlflow: {{tracking_uri: 'http://127.0.0.1:{silent_port}', http_timeout_s: 2, http_retries: 1}}\n"
    files["mlflow.yaml"].write_text(settings)
    started = time.monotonic()
    run_case(files, capsys, demand, None, f"(http://127.0.0.1:{silent_port})")
    assert time.monotonic() - started < 15
