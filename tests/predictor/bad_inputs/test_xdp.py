"""Bad inputs of xdp: the files its commands read (checked before any kernel call)."""

from __future__ import annotations

import pytest

from tests.predictor.bad_inputs.inputs import Args, Files, Spoil, write
from tests.predictor.bad_inputs.runner import Case, ids, params, run_case

CASES = [
    # xdp: the files its commands read (checked before any kernel call)
    Case(
        "xdp-set-profile-missing",
        lambda f: [
            "xdp",
            "set-profile",
            "--pin-dir",
            str(f["out"] / "pins"),
            "--profile",
            str(f["out"] / "none.yaml"),
            "--dry-run",
        ],
        None,
        "none.yaml",
    ),
    Case(
        "xdp-set-profile-not-yaml",
        lambda f: [
            "xdp",
            "set-profile",
            "--pin-dir",
            str(f["out"] / "pins"),
            "--profile",
            str(f["profile.yaml"]),
            "--dry-run",
        ],
        write("profile.yaml", "weights: [\n"),
        "profile.yaml",
    ),
    Case(
        "xdp-agent-config-missing",
        lambda f: ["xdp", "agent", "--agent-config", str(f["out"] / "none.yaml")],
        None,
        "none.yaml",
    ),
    Case(
        "xdp-load-profile-not-utf8",
        lambda f: (
            [
                "xdp",
                "load",
                "--iface",
                "lo",
                "--targets",
                "a,b",
                "--pin-dir",
                str(f["out"] / "pins"),
                "--profile",
                str(f["profile.yaml"]),
            ]
        ),
        lambda f: f["profile.yaml"].write_bytes(b"name: \xff\n"),
        "not UTF-8",
    ),
    Case("xdp-status-not-bpffs", lambda f: ["xdp", "status", "--pin-dir", str(f["out"] / "pins")], None, "--pin-dir"),
    Case("xdp-unload-not-bpffs", lambda f: ["xdp", "unload", "--pin-dir", str(f["out"] / "pins")], None, "--pin-dir"),
    Case("xdp-upgrade-not-bpffs", lambda f: ["xdp", "upgrade", "--pin-dir", str(f["out"] / "pins")], None, "--pin-dir"),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("args", "spoil", "says"), params(CASES), ids=ids(CASES))
def test_bad_input(files: Files, capsys: pytest.CaptureFixture[str], args: Args, spoil: Spoil, says: str) -> None:
    run_case(files, capsys, args, spoil, says)
