"""Bad user files, whatever command reads them: not UTF-8, nested too deep, larger than their stated maximum.

Every reader goes through ``predictor.userfiles`` (or, for tables, the same size check in
``predictor.sources.files``), so each failure is one line naming the file. Oversized files are sparse: the
size is refused from the file's metadata, before a byte is read.
"""

from __future__ import annotations

import pytest

from tests.predictor.bad_inputs.inputs import (
    Args,
    Files,
    Spoil,
    diagnose,
    forecast,
    loop,
    nested_json,
    nested_yaml,
    plan,
    plan_pods,
    simulate,
    sparse,
    write,
    write_bytes,
)
from tests.predictor.bad_inputs.runner import Case, ids, params, run_case

GIB = 1 << 30
NOT_UTF8 = b"loop: {interval_s: \xff\xfe}\n"


def set_profile(f: Files) -> list[str]:
    return ["xdp", "set-profile", "--pin-dir", str(f["out"] / "pins"), "--profile", str(f["profile.yaml"]), "--dry-run"]


def agent(f: Files) -> list[str]:
    return ["xdp", "agent", "--agent-config", str(f["profile.yaml"])]


def demand_config(f: Files) -> list[str]:
    return [
        "demand",
        "--config",
        str(f["settings.yaml"]),
        "--history",
        str(f["history.csv"]),
        "--pending",
        str(f["pending.csv"]),
        "--out",
        str(f["out"] / "demand.csv"),
    ]


CASES = [
    # settings (every command's --config goes through the same loader)
    Case("settings-not-utf8", loop, write_bytes("settings.yaml", NOT_UTF8), "not UTF-8"),
    Case("settings-nested-100000", loop, write("settings.yaml", nested_yaml(100_000)), "nested deeper"),
    Case("settings-nested-65", loop, write("settings.yaml", nested_yaml(65)), "nested deeper"),
    Case("settings-too-large", loop, sparse("settings.yaml", 17 << 20), "above the 16 MiB limit"),
    Case("demand-settings-not-utf8", demand_config, write_bytes("settings.yaml", NOT_UTF8), "not UTF-8"),
    # Kubernetes lists
    Case("plan-queues-not-utf8", plan, write_bytes("queues.json", b'{"items": ["\xff"]}'), "not UTF-8"),
    Case("plan-queues-nested-100000", plan, write("queues.json", nested_json(100_000)), "nested deeper"),
    Case("plan-nodes-nested-100000", plan, write("nodes.json", nested_json(100_000)), "nested deeper"),
    Case("plan-pods-not-utf8", plan_pods, write_bytes("pods.json", b"\xc3\x28"), "not UTF-8"),
    Case("plan-queues-too-large", plan, sparse("queues.json", 2 * GIB), "above the 1 GiB limit"),
    Case("loop-queues-nested-100000", loop, write("queues.json", nested_json(100_000)), "nested deeper"),
    # tables
    Case("forecast-history-too-large", forecast, sparse("history.csv", 17 * GIB), "above the 16 GiB limit"),
    Case("simulate-jobs-too-large", simulate, sparse("jobs.csv", 17 * GIB), "above the 16 GiB limit"),
    # xdp profiles and the agent's settings
    Case("xdp-profile-not-utf8", set_profile, write_bytes("profile.yaml", b"name: \xff\n"), "not UTF-8"),
    Case("xdp-profile-nested-100000", set_profile, write("profile.yaml", nested_yaml(100_000)), "nested deeper"),
    Case("xdp-agent-config-not-utf8", agent, write_bytes("profile.yaml", b"node: \xff\n"), "not UTF-8"),
    Case("xdp-agent-config-nested-65", agent, write("profile.yaml", nested_yaml(65)), "nested deeper"),
    # model files
    Case("diagnose-model-not-utf8", diagnose, write_bytes("model.json", b'{"a": "\xff"}'), "not UTF-8"),
    Case("diagnose-model-nested-100000", diagnose, write("model.json", nested_json(100_000)), "nested deeper"),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("args", "spoil", "says"), params(CASES), ids=ids(CASES))
def test_bad_input(files: Files, capsys: pytest.CaptureFixture[str], args: Args, spoil: Spoil, says: str) -> None:
    run_case(files, capsys, args, spoil, says)
